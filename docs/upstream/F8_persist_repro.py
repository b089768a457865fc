"""F8, the common path: a double stop cuts the run's shielded `_persist` short.

A channel delivers a message to an idle session; the wake-up dispatcher starts
a run whose InboxMiddleware drains it into the agent's context, and the reply
ends. The turn-tail check finds the inbox empty and releases the consumer
registration (`released = True`), so the run's `finally` skips
abandon_inbox_consumer and starts `_persist` as a task. The user clicks stop
twice. Stop 1's cancel lands at `await asyncio.shield(persist_task)`; the
`except asyncio.CancelledError` branch then awaits `persist_task` unshielded,
so stop 2's cancel is passed on into `_persist` and cuts its storage write
short: the state holding the drained message is never stored. The message is
in neither the stored context nor the inbox, and no wake-up is queued.

Left to the natural race, this is where two stops pressed when the reply ends
land in most losing tries (sqlite's write takes a few thread round trips).
Here a storage subclass holds the session's `update_session_state` until both
stops have been answered (2 s at most), so that the path is taken every time.
No bus call is held and abandon_inbox_consumer is never called: a fix that
only shields abandon_inbox_consumer leaves this script at exit 1.

Run: python F8_persist_repro.py (agentscope 2.0.7 or later; InMemoryMessageBus, sqlite).
Exit 1: the message was lost; 0: it was stored; 3: error.
"""
import asyncio
import contextlib
import inspect
import json
import logging
import shutil
import sys
import tempfile
import traceback
from typing import Literal

from agentscope.agent import ContextConfig, ReActConfig
from agentscope.app._manager import (
    BackgroundTaskManager, CancelDispatcher, ChatRunRegistry, SchedulerManager, WakeupDispatcher,
)
from agentscope.app._router._session import interrupt_session
from agentscope.app import _bus_ops
from agentscope.app._service import ChatService, ResourceAccessService
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys
from agentscope.app.storage import (
    AgentData, AgentRecord, AsyncSQLAlchemyStorage, ChatModelConfig, SessionConfig, UserRecord,
)
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.credential import CredentialBase, CredentialFactory
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import HintBlock, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.state import AgentState

SCRIPT: list = []  # the model's answers, in order: ("tool", name, args) or ("text", text)


class ScriptedCredential(CredentialBase):
    type: Literal["scripted"] = "scripted"

    @classmethod
    def get_chat_model_class(cls):
        return ScriptedModel


class ScriptedModel(ChatModelBase):
    def __init__(self, credential, model, parameters=None, **_):
        super().__init__(credential=credential, model=model, parameters=parameters,
                         stream=False, max_retries=0, retry_delay=0.0)
        self.formatter = OpenAIChatFormatter()

    @classmethod
    def list_models(cls, custom_yaml_dir=None):
        return []

    async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kwargs):
        turn = SCRIPT.pop(0) if SCRIPT else ("text", "done")
        if turn[0] == "tool":
            block = ToolCallBlock(id=f"call-{len(SCRIPT)}", name=turn[1], input=json.dumps(turn[2]))
        else:
            block = TextBlock(text=turn[1])
        return ChatResponse(content=[block], is_last=True)


class HeldStorage(AsyncSQLAlchemyStorage):
    """Once armed for ``session``, its next ``update_session_state`` (the one
    `_persist` makes) waits until ``answered`` is set, 2 s at most, and notes
    whether a cancel landed in that wait."""

    def arm(self, session):
        self.session, self.landed = session, False
        self.held, self.answered = asyncio.Event(), asyncio.Event()

    async def update_session_state(self, *args, **kwargs):
        session = kwargs.get("session_id", args[2] if len(args) > 2 else None)
        if session is not None and session == getattr(self, "session", None) and not self.held.is_set():
            self.held.set()
            asyncio.get_running_loop().call_later(2.0, self.answered.set)
            try:
                await self.answered.wait()
            except asyncio.CancelledError:
                self.landed = True
                raise
        return await super().update_session_state(*args, **kwargs)


async def open_app(stack, bus, storage_class, folder):
    """ChatService and its managers on ``bus``, as agentscope's lifespan wires them."""
    CredentialFactory.register_credential(ScriptedCredential)
    storage = await stack.enter_async_context(storage_class(f"sqlite+aiosqlite:///{folder}/app.db"))
    workspaces = LocalWorkspaceManager(basedir=f"{folder}/ws")
    workspaces.bind_storage(storage)
    await stack.enter_async_context(workspaces)
    tasks = await stack.enter_async_context(BackgroundTaskManager(message_bus=bus))
    # 2.0.7's SchedulerManager has no switch (and nothing is scheduled here).
    off = {"enabled": False} if "enabled" in inspect.signature(SchedulerManager).parameters else {}
    registry = await stack.enter_async_context(ChatRunRegistry())

    service = ChatService(
        storage=storage, workspace_manager=workspaces, background_task_manager=tasks, message_bus=bus,
        scheduler_manager=SchedulerManager(storage=storage, message_bus=bus, workspace_manager=workspaces,
                                           **off),
        resource_access_service=ResourceAccessService(storage, DenyAllResourceAccessPolicy()),
    )
    for part in (WakeupDispatcher(bus, storage, service, registry),
                 CancelDispatcher(message_bus=bus, registry=registry, bg_manager=tasks)):
        await stack.enter_async_context(part)
    user = UserRecord().id
    credential = await storage.upsert_credential(user, ScriptedCredential(name="scripted"))
    data = AgentData(name="solo", system_prompt="You are helpful.", context_config=ContextConfig(),
                     react_config=ReActConfig())
    agent = await storage.upsert_agent(user, AgentRecord(user_id=user, data=data))

    async def new_session(**config):
        ws_id = await workspaces.assign_workspace_id(user_id=user, agent_id=agent, session_id="")
        session = (await storage.upsert_session(
            user_id=user, agent_id=agent, state=AgentState(),
            config=SessionConfig(workspace_id=ws_id, chat_model_config=ChatModelConfig(
                type="scripted", credential_id=credential, model="scripted", parameters={}), **config),
        )).id
        workspace = await workspaces.get_workspace(user, agent, session, ws_id)
        await workspace.list_skills(agent_id=agent)  # its first use starts a subprocess: do it now
        return session

    return storage, service, registry, user, agent, new_session


async def story(bus, app):
    storage, service, registry, user, agent, new_session = app
    session = await new_session()
    storage.arm(session)
    SCRIPT[:] = [("text", "noted")]
    message = "channel: build 7 on main is red"
    payload = HintBlock(hint=message, source=json.dumps({"label": "channel"}))

    async def stop():
        await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)

    async def user_double_clicks():
        await storage.held.wait()
        await stop()
        await stop()
        storage.answered.set()

    clicks = asyncio.create_task(user_double_clicks())
    await _bus_ops.deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent,
                                    payload=payload.model_dump(mode="json"))
    await asyncio.wait([clicks], timeout=10)
    for _ in range(30):
        await asyncio.sleep(0.05)
        task = registry.get(session)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=5)
    if not storage.held.is_set():
        raise RuntimeError("the run never reached _persist's update_session_state")
    record = await storage.get_session(user, agent, session)
    stored = message in str([m.model_dump() for m in record.state.context])
    queued = message in str(await bus.queue_drain(MessageBusKeys.inbox(session)))
    wakeups = len(await bus.queue_drain(MessageBusKeys.wakeup_queue()))
    registered = await bus.registry_get(MessageBusKeys.inbox_consumer(session), MessageBusKeys.INBOX_CONSUMER_FIELD)
    print(f"stop 2's cancel landed in _persist's update_session_state: {storage.landed}; the message in "
          f"the stored context: {stored}, in the inbox: {queued}; wake-ups queued: {wakeups}; consumer "
          f"registration {'LEFT BEHIND' if registered is not None else 'gone'}")
    return [] if stored or queued else ["the message is lost"]


async def main() -> int:
    bus = InMemoryMessageBus()
    folder = tempfile.mkdtemp(prefix="f8p-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            app = await open_app(stack, bus, HeldStorage, folder)
            problems = await story(bus, app)
        if problems:
            print("BUG: " + "; ".join(problems))
            return 1
        print("OK: the consumed message was stored")
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)
    try:
        sys.exit(asyncio.run(main()))
    except Exception:  # noqa: BLE001 - the script's own failure, not the finding
        traceback.print_exc()
        print("ERROR: the reproduction itself failed (see above)")
        sys.exit(3)

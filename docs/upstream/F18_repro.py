"""F18: on Redis, a stop whose cancel lands in the turn tail's inbox drain loses what it drained.

A teammate's message reaches a session's inbox while its run's model answers
(the run is registered as the inbox's consumer, so the message is left to it).
The reply ends; in the turn tail, has_pending_inbox_or_release drains the inbox
to see whether the run must go around again (on Redis one EVAL that reads and
deletes). The user presses stop, and the cancel lands while the run waits for
that drain's reply: the server has deleted the entries, the run never gets
them. Its `finally` finds the inbox empty, releases the registration and stores
the state: the message is in neither the stored context nor the inbox, and
nothing will ever deliver it.

On RedisMessageBus the drain's reply read is a real wait (a stop lands there in
4 of 10 natural tries on 2.0.8 and 8 of 10 on 2.0.11 with a 4 MB message); here
an InMemoryMessageBus subclass applies the drain, then returns its reply only
after the stop has been answered (1 s at most): the reply is on its way.

Run: python F18_repro.py (agentscope 2.0.7 or later; InMemoryMessageBus, sqlite).
Exit 1: the message was lost; 0: it was kept (stored or still queued); 3: error.
"""
import asyncio
import contextlib
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


class DrainReplyBus(InMemoryMessageBus):
    """Once REPLY_END was published on ``session``'s events, the next drain of
    its inbox that takes something (the turn tail's) is applied, and its reply
    held until ``answered`` is set (1 s at most). While the model answers
    (MODEL_CALL_START), ``payload`` is delivered to the inbox."""

    def arm(self, session, agent, user, payload):
        self.session, self.agent, self.user, self.payload = session, agent, user, payload
        self.armed = self.landed = False
        self.held, self.answered = asyncio.Event(), asyncio.Event()

    async def publish(self, key, payload):
        await super().publish(key, payload)
        if key != MessageBusKeys.session_events(self.session):
            return
        if payload.get("type") == "MODEL_CALL_START" and self.payload is not None:
            message, self.payload = self.payload, None
            await _bus_ops.deliver_to_inbox(self, user_id=self.user, session_id=self.session,
                                            agent_id=self.agent, payload=message)
        elif payload.get("type") == "REPLY_END":
            self.armed = True

    async def queue_drain(self, key, max_count=100):
        entries = await super().queue_drain(key, max_count)
        if self.armed and entries and key == MessageBusKeys.inbox(self.session):
            self.armed = False
            self.held.set()
            asyncio.get_running_loop().call_later(1.0, self.answered.set)
            try:
                await self.answered.wait()
            except asyncio.CancelledError:
                self.landed = True
                raise
        return entries


async def open_app(stack, bus, folder):
    """ChatService and its managers on ``bus``, as agentscope's lifespan wires them."""
    CredentialFactory.register_credential(ScriptedCredential)
    storage = await stack.enter_async_context(AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{folder}/app.db"))
    workspaces = LocalWorkspaceManager(basedir=f"{folder}/ws")
    workspaces.bind_storage(storage)
    await stack.enter_async_context(workspaces)
    tasks = await stack.enter_async_context(BackgroundTaskManager(message_bus=bus))
    registry = await stack.enter_async_context(ChatRunRegistry())

    service = ChatService(
        storage=storage, workspace_manager=workspaces, background_task_manager=tasks, message_bus=bus,
        scheduler_manager=SchedulerManager(storage=storage, message_bus=bus, workspace_manager=workspaces,
                                           enabled=False),
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


async def main() -> int:
    bus = DrainReplyBus()
    bus.arm(None, None, None, None)
    folder = tempfile.mkdtemp(prefix="f18-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            storage, service, registry, user, agent, new_session = await open_app(stack, bus, folder)
            session = await new_session()
            SCRIPT[:] = [("text", "noted")]
            message = "teammate: the staging deploy is done"
            hint = HintBlock(hint=message, source=json.dumps({"label": "team member"}))
            bus.arm(session, agent, user, hint.model_dump(mode="json"))

            async def user_presses_stop():
                await bus.held.wait()
                await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)
                bus.answered.set()

            pressing = asyncio.create_task(user_presses_stop())
            first = HintBlock(hint="channel: build 7 is green", source=json.dumps({"label": "channel"}))
            await _bus_ops.deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent,
                                            payload=first.model_dump(mode="json"))
            await asyncio.wait([pressing], timeout=10)
            for _ in range(40):
                await asyncio.sleep(0.05)
                task = registry.get(session)
                if task is not None and not task.done():
                    await asyncio.wait([task], timeout=5)
            if not bus.held.is_set():
                raise RuntimeError("the turn tail's drain never took the message")
            record = await storage.get_session(user, agent, session)
            stored = message in str([m.model_dump() for m in record.state.context])
            queued = message in str(await bus.queue_drain(MessageBusKeys.inbox(session)))
        print(f"the stop's cancel landed while the drain's reply was on its way: {bus.landed}; "
              f"the teammate's message in the stored context: {stored}, in the inbox: {queued}")
        if not stored and not queued:
            print("BUG: the message the turn tail drained is lost")
            return 1
        print("OK: the drained message was kept")
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

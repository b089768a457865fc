"""F8: a double stop in the turn tail loses the message the run had consumed.

A channel delivers a message to an idle session; the wake-up dispatcher starts
a run whose InboxMiddleware drains it into the agent's context, and the reply
ends. The run is in its turn tail, holding the session lock. The user clicks
stop twice: stop 1's cancel lands in the turn tail's inbox-lock acquire; the
run's `finally` calls abandon_inbox_consumer (unshielded), and stop 2, which
still finds the session lock held, lands there (A: its inbox-lock acquire;
B: its registry_del). CancelledError leaves the `finally` before _persist is
created: the message is in neither the stored context nor the inbox, no wake-up
is queued, and the consumer registration is left behind.

On Redis each of those calls is a round trip; here an InMemoryMessageBus
subclass makes each held call return only after the stop has been answered.

Run: python F8_repro.py (agentscope 2.0.7 or later; InMemoryMessageBus, sqlite).
Exit 1: the message was lost or the registration left; 0: neither; 3: error.
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


class DoubleStopBus(InMemoryMessageBus):
    """Once REPLY_END was published on ``session``'s events, the next acquire of
    its inbox lock (the turn tail's) is held until ``answered[0]`` is set; once a
    cancel landed there, the clean-up's next ``mode`` call ("acquire" or
    "registry_del") until ``answered[1]``. 1 s at most each."""

    def arm(self, session, mode):
        self.session, self.mode, self.armed, self.step = session, mode, False, 0
        self.held = [asyncio.Event(), asyncio.Event()]
        self.answered = [asyncio.Event(), asyncio.Event()]
        self.landed = [False, False]

    async def publish(self, key, payload):
        if payload.get("type") == "REPLY_END" and key == MessageBusKeys.session_events(self.session):
            self.armed = True
        await super().publish(key, payload)

    async def _hold(self, call):
        step = self.step
        if not self.armed or step > 1 or (step == 0 and call != "acquire") or (step == 1 and call != self.mode):
            return
        if step == 1 and not self.landed[0]:
            return
        self.step += 1
        self.held[step].set()
        asyncio.get_running_loop().call_later(1.0, self.answered[step].set)
        try:
            await self.answered[step].wait()
        except asyncio.CancelledError:
            self.landed[step] = True
            raise

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key, *, ttl_secs=600):
        if key == MessageBusKeys.inbox_lock(self.session):
            await self._hold("acquire")
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield

    async def registry_del(self, namespace, field):
        if namespace == MessageBusKeys.inbox_consumer(self.session):
            await self._hold("registry_del")
        await super().registry_del(namespace, field)

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


async def story(bus, app, mode):
    storage, service, registry, user, agent, new_session = app
    session = await new_session()
    bus.arm(session, mode)
    SCRIPT[:] = [("text", "noted")]
    message = f"channel: build {mode} on main is red"
    payload = HintBlock(hint=message, source=json.dumps({"label": "channel"}))

    async def stop():
        await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)

    async def user_double_clicks():
        await bus.held[0].wait()
        await stop()
        bus.answered[0].set()
        await asyncio.wait([asyncio.create_task(bus.held[1].wait())], timeout=2)
        await stop()
        bus.answered[1].set()

    clicks = asyncio.create_task(user_double_clicks())
    await _bus_ops.deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent,
                                    payload=payload.model_dump(mode="json"))
    await asyncio.wait([clicks], timeout=10)
    for _ in range(30):
        await asyncio.sleep(0.05)
        task = registry.get(session)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=5)
    if not bus.landed[0] or not bus.held[1].is_set():
        raise RuntimeError(f"{mode}: the turn tail or the clean-up call was never held")
    record = await storage.get_session(user, agent, session)
    stored = message in str([m.model_dump() for m in record.state.context])
    queued = message in str(await bus.queue_drain(MessageBusKeys.inbox(session)))
    wakeups = len(await bus.queue_drain(MessageBusKeys.wakeup_queue()))
    registered = await bus.registry_get(MessageBusKeys.inbox_consumer(session), MessageBusKeys.INBOX_CONSUMER_FIELD)
    print(f"{mode}: stop 2 pressed while the clean-up call was held; its cancel landed there: {bus.landed[1]}; "
          f"the message in the stored "
          f"context: {stored}, in the inbox: {queued}; wake-ups queued: {wakeups}; consumer registration "
          f"{'LEFT BEHIND' if registered is not None else 'gone'}")
    problems = [] if stored or queued else [f"{mode}: the message is lost"]
    return problems + ([f"{mode}: the consumer registration is left behind"] if registered is not None else [])


async def main() -> int:
    bus = DoubleStopBus()
    bus.arm(None, None)
    folder = tempfile.mkdtemp(prefix="f8-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            app = await open_app(stack, bus, folder)
            problems = await story(bus, app, "acquire") + await story(bus, app, "registry_del")
        if problems:
            print("BUG: " + "; ".join(problems))
            return 1
        print("OK: the consumed message was stored and the registration released")
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

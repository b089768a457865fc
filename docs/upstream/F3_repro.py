"""F3: a stop pressed once the confirmation card shows is lost.

The user messages a session whose model calls GatedAction, a tool that asks
for confirmation: the run publishes REQUIRE_USER_CONFIRM (the card). The run
still holds the session lock while it finishes its turn, so the stop the user
presses now is published on the interrupt channel (HTTP 202) and the cancel
dispatcher cancels the run task after the agent has parked. Nothing ends the
reply: no REPLY_END(INTERRUPTED), the session stays awaiting_permission.

A. The stop reaches the server during the turn tail's acquire of the inbox
   lock. On Redis that acquire is a round trip; here an InMemoryMessageBus
   subclass makes that one call return only after the stop was answered.
B. No hook: a session created from the UI (naming.auto) names itself with a
   model call (1 s here) after parking, under the session lock; the user
   presses stop 0.3 s after the card.

Run: python F3_repro.py (agentscope 2.0.8 or later; InMemoryMessageBus, sqlite).
Exit 1: a stop was lost; 0: both stops ended the reply; 3: the script failed.
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
from agentscope.app._router._chat import chat as chat_endpoint
from agentscope.app._router._schema import ChatRequest
from agentscope.app._router._session import interrupt_session
from agentscope.app._service import ChatService, ResourceAccessService, SessionService
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys
from agentscope.app.storage import (
    AgentData, AgentRecord, AsyncSQLAlchemyStorage, ChatModelConfig, SessionConfig, SessionNaming, UserRecord,
)
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.credential import CredentialBase, CredentialFactory
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import ToolBase, ToolChunk

SCRIPT: list = []  # the model's answers, in order: ("tool", name, args) or ("text", text)
NAMING_SECS = [0.0]  # how long a model call takes once the card is out (the naming call)


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
        turn = SCRIPT.pop(0) if SCRIPT else ("text", "A title")
        if turn[0] == "tool":
            block = ToolCallBlock(id=f"call-{len(SCRIPT)}", name=turn[1], input=json.dumps(turn[2]))
        else:
            await asyncio.sleep(NAMING_SECS[0])
            block = TextBlock(text=turn[1])
        return ChatResponse(content=[block], is_last=True)


class GatedAction(ToolBase):
    name = "GatedAction"
    description = "Change something outside; the user must confirm it."
    input_schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    is_concurrency_safe = False
    is_read_only = False

    async def check_permissions(self, tool_input, context):
        return PermissionDecision(behavior=PermissionBehavior.PASSTHROUGH, message="ask the user")

    async def call(self, note: str = "") -> ToolChunk:
        return ToolChunk(content=[TextBlock(text=f"done: {note}")])


class SlowTurnTailBus(InMemoryMessageBus):
    """While ``hold`` is on, once a card was published, the next acquire of
    that session's inbox lock (the turn tail's) waits for ``stop_answered`` (1 s at most)."""

    def __init__(self):
        super().__init__()
        self.hold, self.carded, self.held, self.stop_answered = False, None, False, asyncio.Event()

    async def publish(self, key, payload):
        if self.hold and payload.get("type") == "REQUIRE_USER_CONFIRM":
            self.carded = key.rsplit(":", 1)[-1]
        await super().publish(key, payload)

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key, *, ttl_secs=600):
        if self.carded and key == MessageBusKeys.inbox_lock(self.carded):
            self.carded, self.held = None, True
            asyncio.get_running_loop().call_later(1.0, self.stop_answered.set)
            await self.stop_answered.wait()
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield


async def open_app(stack, bus, folder):
    """ChatService and its managers on ``bus``, as agentscope's lifespan wires them."""
    CredentialFactory.register_credential(ScriptedCredential)
    storage = await stack.enter_async_context(AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{folder}/app.db"))
    workspaces = LocalWorkspaceManager(basedir=f"{folder}/ws")
    workspaces.bind_storage(storage)
    await stack.enter_async_context(workspaces)
    tasks = await stack.enter_async_context(BackgroundTaskManager(message_bus=bus))
    registry = await stack.enter_async_context(ChatRunRegistry())

    async def tools(user_id, agent_id, session_id):
        return [GatedAction()]

    service = ChatService(
        storage=storage, workspace_manager=workspaces, background_task_manager=tasks, message_bus=bus,
        scheduler_manager=SchedulerManager(storage=storage, message_bus=bus, workspace_manager=workspaces,
                                           enabled=False),
        resource_access_service=ResourceAccessService(storage, DenyAllResourceAccessPolicy()),
        extra_agent_tools=tools,
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


async def story(bus, app, label, **config):
    storage, service, registry, user, agent, new_session = app
    session = await new_session(**config)
    events, ready = [], asyncio.Event()

    async def ui():
        async for event in bus.subscribe(MessageBusKeys.session_events(session), on_ready=ready.set):
            events.append(event)

    tap = asyncio.create_task(ui())
    await ready.wait()
    SCRIPT[:] = [("tool", "GatedAction", {"note": "deploy"})]
    await chat_endpoint(ChatRequest(agent_id=agent, session_id=session,
                                    input=UserMsg(name="user", content="please deploy")),
                        user_id=user, chat_service=service, chat_run_registry=registry, message_bus=bus)
    run = registry.get(session)
    while not any(e.get("type") == "REQUIRE_USER_CONFIRM" for e in events):
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.3 if config else 0.0)
    seen = len(events)
    await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)  # HTTP 202
    bus.stop_answered.set()
    await asyncio.wait([run], timeout=5)
    for _ in range(40):  # a resume the stop queued may end the reply a moment later
        await asyncio.sleep(0.05)
        task = registry.get(session)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=5)
    tap.cancel()
    ends = [e.get("finished_reason") for e in events[seen:] if e.get("type") == "REPLY_END"]
    record = await storage.get_session(user, agent, session)
    parked = SessionService.derive_parked_status(record.state.context).value
    print(f"{label}: stop answered 202; run task cancelled: {run.cancelled()}; "
          f"REPLY_END after the stop: {ends or 'none'}; session: {parked}")
    return "interrupted" not in ends and parked != "idle"


async def main() -> int:
    bus = SlowTurnTailBus()
    folder = tempfile.mkdtemp(prefix="f3-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            app = await open_app(stack, bus, folder)
            bus.hold = True
            lost_a = await story(bus, app, "A (stop during the turn tail)")
            if not bus.held:
                raise RuntimeError("A: the turn tail never acquired the inbox lock after the card")
            bus.hold, bus.stop_answered = False, asyncio.Event()
            NAMING_SECS[0] = 1.0
            lost_b = await story(bus, app, "B (stop during the auto-naming call)", naming=SessionNaming(auto=True))
        if lost_a or lost_b:
            print("BUG: a stop pressed once the card showed was lost (no REPLY_END, the session stays parked)")
            return 1
        print("OK: each stop ended the parked reply")
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

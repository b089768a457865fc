"""F10: one stop in a parked run's clean-up drops the call the user then confirms.

The user messages a session whose model calls GatedAction (a tool that asks for
confirmation); while the model answers, a team member delivers a message to the
session's inbox (the run is the registered consumer, so no wake-up is queued).
The card shows; the turn tail finds the message, and the parked run's `finally`
calls abandon_inbox_consumer. The user presses stop once and its cancel lands in
that call (on Redis a round trip with the session lock held; here an
InMemoryMessageBus subclass holds that one call until the stop is answered:
A, its inbox-lock acquire; B, its registry_del). _persist never runs, so the
parked call is not stored. The user then confirms the card: HTTP 200, the resume
ends REPLY_END(ERROR) "setup", and GatedAction never runs.

Run: python F10_repro.py (agentscope 2.0.7 or later; InMemoryMessageBus, sqlite).
Exit 1: the bug shows; 0: the stop ended the reply or the confirmed call ran,
with no error reply; 3: the script itself failed.
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
from agentscope.event import ConfirmResult, UserConfirmResultEvent
from agentscope.message import HintBlock, TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import ToolBase, ToolChunk

SCRIPT: list = []  # the model's answers, in order: ("tool", name, args) or ("text", text)
BEFORE_ANSWER: list = []  # events a model call waits for before it answers


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
        for event in BEFORE_ANSWER:
            await event.wait()
        turn = SCRIPT.pop(0) if SCRIPT else ("text", "done")
        if turn[0] == "tool":
            block = ToolCallBlock(id=f"call-{len(SCRIPT)}", name=turn[1], input=json.dumps(turn[2]))
        else:
            block = TextBlock(text=turn[1])
        return ChatResponse(content=[block], is_last=True)


class GatedAction(ToolBase):
    name = "GatedAction"
    description = "Change something outside; the user must confirm it."
    input_schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    is_concurrency_safe = False
    is_read_only = False
    runs: list = []

    async def check_permissions(self, tool_input, context):
        return PermissionDecision(behavior=PermissionBehavior.PASSTHROUGH, message="ask the user")

    async def call(self, note: str = "") -> ToolChunk:
        GatedAction.runs.append(note)
        return ToolChunk(content=[TextBlock(text=f"done: {note}")])


class CleanupHoldBus(InMemoryMessageBus):
    """Once a card was published: ``mode`` "acquire" holds the second acquire of
    the session's inbox lock (the clean-up's; the first is the turn tail's),
    "registry_del" the first registry_del of its inbox consumer, until
    ``answered`` is set (1 s at most). ``landed``: a cancel arrived there."""

    def __init__(self):
        super().__init__()
        self.mode = None

    def arm(self, mode):
        self.mode, self.carded, self.acquires = mode, None, 0
        self.held, self.answered, self.landed = asyncio.Event(), asyncio.Event(), False

    async def publish(self, key, payload):
        if self.mode and payload.get("type") == "REQUIRE_USER_CONFIRM":
            self.carded = key.rsplit(":", 1)[-1]
        await super().publish(key, payload)

    async def _hold(self, mode):
        if self.mode != mode:
            return
        self.mode = None
        self.held.set()
        asyncio.get_running_loop().call_later(1.0, self.answered.set)
        try:
            await self.answered.wait()
        except asyncio.CancelledError:
            self.landed = True
            raise

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key, *, ttl_secs=600):
        if self.carded and key == MessageBusKeys.inbox_lock(self.carded):
            self.acquires += 1
            if self.acquires == 2:
                await self._hold("acquire")
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield

    async def registry_del(self, namespace, field):
        if self.carded and namespace == MessageBusKeys.inbox_consumer(self.carded):
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


async def story(bus, app, mode):
    storage, service, registry, user, agent, new_session = app
    session = await new_session()
    events, ready = [], asyncio.Event()

    async def ui():
        async for event in bus.subscribe(MessageBusKeys.session_events(session), on_ready=ready.set):
            events.append(event)

    async def settle():
        for _ in range(30):
            await asyncio.sleep(0.05)
            task = registry.get(session)
            if task is not None and not task.done():
                await asyncio.wait([task], timeout=5)

    tap = asyncio.create_task(ui())
    await ready.wait()
    bus.arm(mode)
    delivered = asyncio.Event()
    BEFORE_ANSWER[:] = [delivered]
    SCRIPT[:] = [("tool", "GatedAction", {"note": mode}), ("text", "deployed")]
    GatedAction.runs.clear()
    payload = HintBlock(hint="teammate: staging is ready", source=json.dumps({"label": "team"}))

    async def team_member():
        while not any(e.get("type") == "MODEL_CALL_START" for e in events):
            await asyncio.sleep(0.005)
        await _bus_ops.deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent,
                                        payload=payload.model_dump(mode="json"))
        delivered.set()

    async def user_stops():
        await bus.held.wait()
        await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)
        bus.answered.set()

    member, stopper = asyncio.create_task(team_member()), asyncio.create_task(user_stops())
    await chat_endpoint(ChatRequest(agent_id=agent, session_id=session,
                                    input=UserMsg(name="user", content="please deploy")),
                        user_id=user, chat_service=service, chat_run_registry=registry, message_bus=bus)
    await member
    await asyncio.wait([stopper], timeout=5)
    await settle()
    BEFORE_ANSWER.clear()
    if not bus.held.is_set():
        raise RuntimeError(f"{mode}: the clean-up call was never held")
    stop_ended_it = any(e.get("finished_reason") == "interrupted" for e in events)
    card = next(e for e in events if e.get("type") == "REQUIRE_USER_CONFIRM")
    seen = len(events)
    answer = UserConfirmResultEvent(reply_id=card["reply_id"], confirm_results=[
        ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call)) for call in card["tool_calls"]])
    try:
        await chat_endpoint(ChatRequest(agent_id=agent, session_id=session, input=answer), user_id=user,
                            chat_service=service, chat_run_registry=registry, message_bus=bus)
        confirm = "200"
    except Exception as refused:  # the route's HTTPException
        confirm = str(getattr(refused, "status_code", refused))
    await settle()
    tap.cancel()
    ends = [(e.get("finished_reason"), (e.get("error") or {}).get("message"))
            for e in events[seen:] if e.get("type") == "REPLY_END"]
    print(f"{mode}: stop pressed while the clean-up call was held; its cancel landed there: {bus.landed}; "
          f"the stop ended the reply: {stop_ended_it}; confirmation: HTTP {confirm}; "
          f"REPLY_END after it: {ends or 'none'}; GatedAction ran: {len(GatedAction.runs)}")
    problems = [f"the resume ended with an error {ends}"] if any(r == "error" for r, _ in ends) else []
    if stop_ended_it == bool(GatedAction.runs):
        problems.append("the call ran although the stop ended its reply" if stop_ended_it
                        else "the stop did not end the reply, and the confirmed call never ran")
    return problems


async def main() -> int:
    bus = CleanupHoldBus()
    folder = tempfile.mkdtemp(prefix="f10-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            app = await open_app(stack, bus, folder)
            problems = await story(bus, app, "acquire") + await story(bus, app, "registry_del")
        if problems:
            print("BUG: " + "; ".join(problems))
            return 1
        print("OK: the stop ended the parked reply, or the confirmation ran the call")
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

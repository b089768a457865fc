"""F6: stopping a reply leaves its slow tool running, and drops its result.

The user messages a session whose model calls SlowJob, an allowed tool that
runs until this script lets it finish. The user presses stop 0.5 s in, inside
ToolOffloadMiddleware's 10 s foreground wait. The reply ends INTERRUPTED, but
the tool's task is neither cancelled nor handed to the BackgroundTaskManager:
it runs to the end, and its result reaches neither the agent's context nor
its inbox.

agentscope's app pieces are wired as its lifespan does, on InMemoryMessageBus
and sqlite (aiosqlite). Run: python F6_repro.py
Exit 1: the bug shows; 0: the tool was stopped or its result kept; 3: error.
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
from agentscope.app._service import ChatService, ResourceAccessService
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys
from agentscope.app.storage import (
    AgentData, AgentRecord, AsyncSQLAlchemyStorage, ChatModelConfig, SessionConfig, UserRecord,
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


class SlowJob(ToolBase):
    name = "SlowJob"
    description = "A job that takes a while."
    input_schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    is_concurrency_safe = False
    is_read_only = False
    may_finish = None  # asyncio.Event
    log: list = []

    async def check_permissions(self, tool_input, context):
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")

    async def call(self, note: str = "") -> ToolChunk:
        SlowJob.log.append("started")
        try:
            await SlowJob.may_finish.wait()
        except asyncio.CancelledError:
            SlowJob.log.append("cancelled")
            raise
        SlowJob.log.append("finished")
        return ToolChunk(content=[TextBlock(text=f"JOB-OUTPUT {note}")])


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
        return [SlowJob()]

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
    ws_id = await workspaces.assign_workspace_id(user_id=user, agent_id=agent, session_id="")
    session = (await storage.upsert_session(
        user_id=user, agent_id=agent, state=AgentState(),
        config=SessionConfig(workspace_id=ws_id, chat_model_config=ChatModelConfig(
            type="scripted", credential_id=credential, model="scripted", parameters={})),
    )).id
    workspace = await workspaces.get_workspace(user, agent, session, ws_id)
    await workspace.list_skills(agent_id=agent)  # its first use starts a subprocess: do it now
    return storage, service, registry, tasks, user, agent, session


async def main() -> int:
    SlowJob.may_finish = asyncio.Event()
    SCRIPT[:] = [("tool", "SlowJob", {"note": "build"}), ("text", "built")]
    bus = InMemoryMessageBus()
    folder = tempfile.mkdtemp(prefix="f6-")
    try:
        async with contextlib.AsyncExitStack() as stack:
            storage, service, registry, tasks, user, agent, session = await open_app(stack, bus, folder)
            events = []

            async def ui():
                async for event in bus.subscribe(MessageBusKeys.session_events(session), on_ready=ready.set):
                    events.append(event)

            ready = asyncio.Event()
            tap = asyncio.create_task(ui())
            await ready.wait()
            await chat_endpoint(ChatRequest(agent_id=agent, session_id=session,
                                            input=UserMsg(name="user", content="run the build")),
                                user_id=user, chat_service=service, chat_run_registry=registry, message_bus=bus)
            while "started" not in SlowJob.log:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)
            await interrupt_session(session, agent_id=agent, user_id=user, chat_service=service)
            run = registry.get(session)
            if run is not None:
                await asyncio.wait([run], timeout=5)
            ends = [e.get("finished_reason") for e in events if e.get("type") == "REPLY_END"]
            print(f"stop pressed 0.5 s into the tool; reply ended: {ends}; tool: {SlowJob.log}; "
                  f"background tasks: {len(tasks.tasks)}")
            await asyncio.sleep(1.0)
            SlowJob.may_finish.set()
            await asyncio.sleep(0.5)
            record = await storage.get_session(user, agent, session)
            in_context = "JOB-OUTPUT" in str([m.model_dump() for m in record.state.context])
            drained = await bus.queue_drain(MessageBusKeys.inbox(session))
            in_inbox = "JOB-OUTPUT" in str(drained)
            print(f"1 s later the tool: {SlowJob.log}; its result in the context: {in_context}, "
                  f"in the inbox: {in_inbox}")
            tap.cancel()
        if "interrupted" not in ends:
            raise RuntimeError(f"the stop did not end the reply as INTERRUPTED: {ends}")
        if "finished" in SlowJob.log and not (in_context or in_inbox):
            print("BUG: the stopped reply's tool ran on to the end and its result reached no one")
            return 1
        print("OK: the tool was stopped with its reply, or its result was kept")
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

"""F13: with two app processes, a second message to a busy session is accepted
and then fails with REPLY_END(ERROR).

Two nodes (two apps, each with its own RedisMessageBus client, run registry and
dispatchers) share one redis-server and one database, as a deployment behind a
load balancer does:
1. node A takes "please deploy"; its model is still answering;
2. the second message: node A's chat endpoint answers 409 (a run is in flight),
   node B's checks only its own run registry, answers 200 and spawns a run that
   waits for the session lock;
3. node A's model calls GatedAction (asks for confirmation): the agent parks and
   node A's run lets the session go;
4. node B's run takes the lock, the agent rejects a message while a call awaits
   the user, and the run publishes REPLY_END(ERROR) "setup". The message never
   reaches the agent, though the user was told it was accepted.

Run: python F13_repro.py. It starts redis-server (from PATH) on a free loopback
port, or uses REDIS_URL (redis://host:port/db) if set. Needs the `redis` package.
Exit 1: node B accepted the message and its reply ended ERROR; 0: it was refused
or kept for the agent; 3: the script itself failed (e.g. no redis-server).
"""
import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import traceback
import urllib.parse
from typing import Literal

import redis.asyncio as aioredis
from agentscope.agent import ContextConfig, ReActConfig
from agentscope.app._manager import (
    BackgroundTaskManager, CancelDispatcher, ChatRunRegistry, SchedulerManager, WakeupDispatcher,
)
from agentscope.app._router._chat import chat as chat_endpoint
from agentscope.app._router._schema import ChatRequest
from agentscope.app._service import ChatService, ResourceAccessService
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus
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

    async def check_permissions(self, tool_input, context):
        return PermissionDecision(behavior=PermissionBehavior.PASSTHROUGH, message="ask the user")

    async def call(self, note: str = "") -> ToolChunk:
        return ToolChunk(content=[TextBlock(text=f"done: {note}")])


@contextlib.asynccontextmanager
async def redis_server():
    """Where RedisMessageBus connects: REDIS_URL, or a redis-server of our own."""
    if os.environ.get("REDIS_URL"):
        url = urllib.parse.urlsplit(os.environ["REDIS_URL"])
        where = dict(host=url.hostname or "localhost", port=url.port or 6379, db=int(url.path.strip("/") or 0),
                     password=url.password)
        client = aioredis.Redis(**where, socket_connect_timeout=5)
        try:
            await client.ping()
        except Exception as error:
            raise RuntimeError(f"no redis-server answers at REDIS_URL: {error}") from error
        finally:
            await client.aclose()
        yield where
        return
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    folder = tempfile.mkdtemp(prefix="f13-redis-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        client = aioredis.Redis(host="127.0.0.1", port=port)
        for _ in range(50):
            with contextlib.suppress(Exception):
                await client.ping()
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"{binary} did not answer on port {port}")
        await client.aclose()
        yield dict(host="127.0.0.1", port=port)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


async def open_app(stack, bus, folder, user=None):
    """ChatService and its managers on ``bus``, as agentscope's lifespan wires
    them; a user, agent and session unless ``user`` (another node's) is given."""
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

    async def chat(agent, session, text):
        """POST /chat/ on this node: its HTTP status."""
        try:
            await chat_endpoint(ChatRequest(agent_id=agent, session_id=session,
                                            input=UserMsg(name="user", content=text)),
                                user_id=user, chat_service=service, chat_run_registry=registry, message_bus=bus)
        except Exception as refused:  # the route's HTTPException
            if not hasattr(refused, "status_code"):
                raise
            return refused.status_code
        return 200

    if user is not None:
        return chat, registry, None, None
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
    return chat, registry, (user, agent, session), storage


async def main() -> int:
    folder = tempfile.mkdtemp(prefix="f13-")
    try:
        async with redis_server() as where, contextlib.AsyncExitStack() as stack:
            bus_a = await stack.enter_async_context(RedisMessageBus(**where))
            bus_b = await stack.enter_async_context(RedisMessageBus(**where))
            chat_a, registry_a, (user, agent, session), storage = await open_app(stack, bus_a, folder)
            chat_b, registry_b, _, _ = await open_app(stack, bus_b, folder, user=user)
            events, ready = [], asyncio.Event()

            async def ui():
                async for event in bus_a.subscribe(MessageBusKeys.session_events(session), on_ready=ready.set):
                    events.append(event)

            tap = asyncio.create_task(ui())
            await ready.wait()
            answer = asyncio.Event()
            BEFORE_ANSWER[:] = [answer]
            SCRIPT[:] = [("tool", "GatedAction", {"note": "deploy"}), ("text", "deployed")]
            first = await chat_a(agent, session, "please deploy")
            while not any(e.get("type") == "MODEL_CALL_START" for e in events):
                await asyncio.sleep(0.01)
            again_a = await chat_a(agent, session, "also, use the staging database")
            seen = len(events)
            status_b = await chat_b(agent, session, "also, use the staging database")
            print(f"node A: first message {first}, second message {again_a}; node B: second message {status_b}")
            answer.set()
            for _ in range(60):  # both runs, and any run they queue, to their end
                await asyncio.sleep(0.05)
                for registry in (registry_a, registry_b):
                    task = registry.get(session)
                    if task is not None and not task.done():
                        await asyncio.wait([task], timeout=10)
            tap.cancel()
            after = [(e.get("type"), e.get("finished_reason"), (e.get("error") or {}).get("message"))
                     for e in events[seen:] if e.get("type") in ("REQUIRE_USER_CONFIRM", "REPLY_END")]
            record = await storage.get_session(user, agent, session)
            stored = "staging database" in str([m.model_dump() for m in record.state.context])
            queued = "staging database" in str(await bus_a.queue_drain(MessageBusKeys.inbox(session)))
            print(f"published after node B's answer: {after}")
            print(f"the second message in the agent's context: {stored}; in its inbox: {queued}")
        errors = [e for e in after if e[0] == "REPLY_END" and e[1] == "error"]
        if status_b == 200 and errors:
            print("BUG: node B accepted the second message (node A answers 409) and its reply ended with ERROR")
            return 1
        if status_b == 200 and not (stored or queued):
            print("BUG: node B accepted the second message, and it is lost")
            return 1
        print("OK: the second message was refused, or kept without an error reply")
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

"""F5: after a process crash, inbox payloads its run was to consume wait forever.

Two app processes share one redis-server and one sqlite database:
1. process A (a child of this script) takes a user message; its run holds the
   session lock and is registered as the inbox consumer while its model answers;
2. a channel delivers a message with deliver_to_inbox: a consumer is registered,
   so no wake-up is queued;
3. process A is killed (SIGKILL);
4. 600 s pass: simulated on Redis by shortening every key's TTL by 600 s
   (PTTL, then PEXPIRE, or DEL at zero): the lock and the registration lapse;
5. process B starts the app; its WakeupDispatcher drains the trigger queue on
   start. 70 s later the message still waits in the inbox with no lock, no
   registration, no trigger and no run: nothing will consume it. (The patch's
   sweeper wakes the session at its second look, 60 s after B starts.)

Run: python F5_repro.py. It starts redis-server (from PATH) on a free loopback
port, or uses REDIS_URL (redis://host:port/db) if set: give it a scratch database,
as step 4 shortens the TTL of every key in it. Needs the `redis` package.
Exit 1: the message is stranded; 0: it reached the agent; 3: the script failed.
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
from agentscope.app._bus_ops import deliver_to_inbox
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
from agentscope.message import HintBlock, TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.state import AgentState

WAIT_SECS = 70  # how long process B is watched: past a sweep interval (30 s) twice
SCRIPT: list = []  # the model's answers, in order: ("tool", name, args) or ("text", text)
SLOW_MODEL = [False]  # process A: the model announces itself and takes a minute


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
        if SLOW_MODEL[0]:
            print("MODEL_ANSWERING", flush=True)
            await asyncio.sleep(60)
        turn = SCRIPT.pop(0) if SCRIPT else ("text", "done")
        if turn[0] == "tool":
            block = ToolCallBlock(id=f"call-{len(SCRIPT)}", name=turn[1], input=json.dumps(turn[2]))
        else:
            block = TextBlock(text=turn[1])
        return ChatResponse(content=[block], is_last=True)


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
    folder = tempfile.mkdtemp(prefix="f5-redis-")
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


async def open_app(stack, bus, folder, ids=None):
    """With ``ids`` (user, agent, session): ChatService and its managers on
    ``bus``, as agentscope's lifespan wires them. Without: storage only, and a
    new user, agent and session in it."""
    CredentialFactory.register_credential(ScriptedCredential)
    storage = await stack.enter_async_context(AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{folder}/app.db"))
    workspaces = LocalWorkspaceManager(basedir=f"{folder}/ws")
    workspaces.bind_storage(storage)
    await stack.enter_async_context(workspaces)
    if ids is None:
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
        return user, agent, session
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
    return storage, service, registry


async def process_a(folder, where, user, agent, session):
    """The child: the app takes the user's message; its model never finishes."""
    SLOW_MODEL[0] = True
    async with contextlib.AsyncExitStack() as stack:
        bus = await stack.enter_async_context(RedisMessageBus(**where))
        storage, service, registry = await open_app(stack, bus, folder, (user, agent, session))
        await chat_endpoint(ChatRequest(agent_id=agent, session_id=session,
                                        input=UserMsg(name="user", content="summarise today's tickets")),
                            user_id=user, chat_service=service, chat_run_registry=registry, message_bus=bus)
        await asyncio.sleep(60)


async def look(client, session):
    lock, consumer = MessageBusKeys.session_lock(session), MessageBusKeys.inbox_consumer(session)
    return {"inbox": await client.xlen(MessageBusKeys.inbox(session)), "lock": await client.exists(lock),
            "consumer": await client.exists(consumer),
            "wake-ups queued": await client.xlen(MessageBusKeys.wakeup_queue())}


async def main() -> int:
    folder = tempfile.mkdtemp(prefix="f5-")
    child = None
    try:
        async with redis_server() as where, contextlib.AsyncExitStack() as stack:
            client = aioredis.Redis(**where)
            stack.push_async_callback(client.aclose)
            bus = await stack.enter_async_context(RedisMessageBus(**where))
            async with contextlib.AsyncExitStack() as setup:
                user, agent, session = await open_app(setup, bus, folder)
            child = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--process-a", folder, json.dumps(where), user, agent, session,
                stdout=asyncio.subprocess.PIPE)
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            if line.strip() != b"MODEL_ANSWERING":
                raise RuntimeError(f"process A did not start its run: {line!r}")
            message = "new ticket from the support channel"
            await deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent, payload=HintBlock(
                hint=message, source=json.dumps({"label": "channel"})).model_dump(mode="json"))
            print(f"2. a channel delivers while A's run answers: {await look(client, session)}")
            child.kill()
            await child.wait()
            child = None
            for key in await client.keys("*"):  # 600 s pass
                pttl = await client.pttl(key)
                if pttl >= 0:
                    left = pttl - MessageBusKeys.SESSION_RUN_TTL_SECS * 1000
                    await (client.delete(key) if left <= 0 else client.pexpire(key, left))
            print(f"3-4. A is killed, 600 s pass: {await look(client, session)}")
            async with contextlib.AsyncExitStack() as process_b:
                storage, service, registry = await open_app(process_b, bus, folder, (user, agent, session))
                for waited in range(1, WAIT_SECS + 1):  # a sweeper looks twice, 30 s apart
                    await asyncio.sleep(1.0)
                    task = registry.get(session)
                    if task is not None and not task.done():
                        await asyncio.wait([task], timeout=10)
                    stranded = await look(client, session)
                    record = await storage.get_session(user, agent, session)
                    stored = message in str([m.model_dump() for m in record.state.context])
                    if stored:
                        break
            print(f"5. process B started {waited} s ago: {stranded}; the message in the agent's context: {stored}")
        if stranded["inbox"] and not (stranded["lock"] or stranded["consumer"] or stranded["wake-ups queued"]):
            print("BUG: past every lease, the channel's message waits with nothing to consume it")
            return 1
        if stored:
            print("OK: the message reached the agent")
            return 0
        raise RuntimeError(f"the message neither stranded nor stored: {stranded}")
    finally:
        if child is not None:
            child.kill()
            await child.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)
    if sys.argv[1:2] == ["--process-a"]:
        folder, where, user, agent, session = sys.argv[2:7]
        asyncio.run(process_a(folder, json.loads(where), user, agent, session))
        sys.exit(0)
    try:
        sys.exit(asyncio.run(main()))
    except Exception:  # noqa: BLE001 - the script's own failure, not the finding
        traceback.print_exc()
        print("ERROR: the reproduction itself failed (see above)")
        sys.exit(3)

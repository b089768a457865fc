"""F4b: a dropped Redis pub/sub connection ends WakeupDispatcher and the three
CancelDispatcher loops for good.

On a real redis-server with RedisMessageBus: a delivery to an idle session is
dispatched (the path works). Then `CLIENT KILL TYPE pubsub` from another client
(what a failover or a network blip does to subscribers) makes each loop's
subscription raise redis.exceptions.ConnectionError; each logs "... crashed" and
returns, and nothing subscribes again. A delivery at once, and another once the
wake-up channel has a subscriber again (or 5 s on), each queue a trigger nobody
reads: the payloads wait in the inbox. The cancel loops are gone too, so stops
published to this process are no longer served.

Run: python F4b_repro.py. It starts redis-server (from PATH) on a free loopback
port, or uses REDIS_URL (redis://host:port/db; CLIENT KILL TYPE pubsub then drops
every subscriber of that server). Needs the `redis` package.
Exit 1: a loop stayed down; 0: all four came back and both deliveries were
dispatched; 3: the script itself failed.
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
from agentscope.app._service import ChatService, ResourceAccessService
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus
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
    folder = tempfile.mkdtemp(prefix="f4b-redis-")
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
    wakeups = await stack.enter_async_context(WakeupDispatcher(bus, storage, service, registry))
    await stack.enter_async_context(CancelDispatcher(message_bus=bus, registry=registry, bg_manager=tasks))
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
    return storage, registry, wakeups, (user, agent, session)


async def main() -> int:
    folder = tempfile.mkdtemp(prefix="f4b-")
    try:
        async with redis_server() as where, contextlib.AsyncExitStack() as stack:
            admin = aioredis.Redis(**where)
            stack.push_async_callback(admin.aclose)
            bus = await stack.enter_async_context(RedisMessageBus(**where))
            storage, registry, wakeups, (user, agent, session) = await open_app(stack, bus, folder)
            channels = {"wake-up": MessageBusKeys.wakeup_signal(),
                        "session-cancel": MessageBusKeys.session_cancel_channel(),
                        "task-cancel": MessageBusKeys.task_cancel_channel(),
                        "interrupt": MessageBusKeys.session_interrupt_channel()}

            async def deliver_and_look(note, label):
                await deliver_to_inbox(bus, user_id=user, session_id=session, agent_id=agent, payload=HintBlock(
                    hint=note, source=json.dumps({"label": "channel"})).model_dump(mode="json"))
                await asyncio.sleep(1.5)
                task = registry.get(session)
                if task is not None and not task.done():
                    await asyncio.wait([task], timeout=10)
                subscribers = {name: (await admin.pubsub_numsub(key))[0][1] for name, key in channels.items()}
                state = {"inbox": await admin.xlen(MessageBusKeys.inbox(session)),
                         "wake-ups queued": await admin.xlen(MessageBusKeys.wakeup_queue()),
                         "wake-up dispatcher task done": wakeups._task.done(), "subscribers": subscribers}
                print(f"{label}: {state}")
                return state

            before = await deliver_and_look("first note", "1. a delivery before the drop, 1.5 s on")
            if before["inbox"]:
                raise RuntimeError("the delivery before the drop was not dispatched")
            killed = await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            print(f"2. CLIENT KILL TYPE pubsub closed {killed} subscriber connection(s)")
            await deliver_and_look("second note", "3. a delivery at once after the drop, 1.5 s on")
            for _ in range(50):  # until the wake-up channel has a subscriber again, or 5 s
                if (await admin.pubsub_numsub(channels["wake-up"]))[0][1]:
                    break
                await asyncio.sleep(0.1)
            after = await deliver_and_look("third note", "4. a delivery once resubscribed (or 5 s on), 1.5 s on")
            record = await storage.get_session(user, agent, session)
            context = str([m.model_dump() for m in record.state.context])
            print("   in the agent's context: " + ", ".join(
                f"{note}: {note in context}" for note in ("first note", "second note", "third note")))
        down = [name for name, count in after["subscribers"].items() if not count]
        if after["inbox"] or down:
            print(f"BUG: after the pub/sub connection dropped, {after['inbox']} payload(s) wait in the inbox; "
                  f"loops no longer subscribed: {down or 'none'}")
            return 1
        print("OK: every loop subscribed again, and the deliveries were dispatched")
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

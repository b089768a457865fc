"""F19: a node that dies while it works on an answered card loses the answer.

What it shows, on a real redis-server with agentscope's ``RedisMessageBus``
and two app processes sharing it (and one sqlite database):

1. ``solo`` parks on a confirmation: the user's message, its model calls
   ``GatedAction``, the card is published and the call stored ``asking``.
2. Process A (a child process running agentscope's app: ``ChatService``,
   dispatchers) takes the user's answer (HTTP 200). The ``resume`` trigger
   it queues is drained by a wake-up dispatcher (``queue_drain`` removes
   it from the queue: ack-on-read) and the resumed run starts; its model is
   answering (slowly, as models do) and nothing of the answer is stored
   yet: the run persists at its end.
3. Process A is killed (SIGKILL: an OOM kill, a redeploy, a lost node).
4. 600 s pass: the session lock's lease (``SESSION_RUN_TTL_SECS = 600``)
   lapses. Time on a real redis-server cannot be mocked, so it is
   simulated as ``f5_crash_strands_inbox.py`` does: every key's TTL is
   shortened by 600 s.
5. Process B, the replacement, starts agentscope's app on the same Redis
   and database; its ``WakeupDispatcher`` drains the trigger queue on
   start.

The answered call is stored ``asking``, no trigger is queued and no run
is alive: the user's answer, accepted with HTTP 200, is gone, and the card
asks again. ``GatedAction`` ran in process A before it died, so answering
again runs it twice. This is the durability half of upstream #2227 (a
trigger taken off the queue lives only in the memory of the process that
took it); ``f14_shutdown_loses_triggers.py`` shows the same loss in a
graceful shutdown, which the reference fix ``shutdown-keeps-triggers``
covers. No reference fix covers a crash: it needs a drain that holds what
it took until the run has stored its input, which agentscope's
``MessageBus`` has no operation for.

Releases: every release from 2.0.7 to 2.0.11 (the dispatcher's drain and
the resumed run's persist at its end are the same on each).

How the window is hit: by the natural order of events. The process dies
during the resumed run's model call, which the child announces on its
stdout when it starts. No hook in the bus; the only stand-in is time,
simulated on Redis as above.

Needs ``redis-server`` on PATH and the ``redis`` package. Run (from the
repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f19_crash_loses_answer.py

``--with-fix`` applies the harness's reference fixes in both processes
first: the answer is lost all the same (exit 1).

Exit codes: 1 if the answered call is stored ``asking`` with no trigger
and no run after the restart (confirmed); 0 if not; 2 if the setup failed
(no redis-server, ``solo`` did not park, the child did not reach its model
call).
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, ChildNotReady, app_on, child_process, quiet_agentscope, run_processes, say  # noqa: E402
from _redis import RedisServerUnavailable, redis_server  # noqa: E402
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus  # noqa: E402
from f5_crash_strands_inbox import let_time_pass  # noqa: E402
from f14_shutdown_loses_triggers import Node, SetupFailed, confirmation, park, stored_calls  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

BOOK = "f19"
SESSION_RUN_TTL_SECS = MessageBusKeys.SESSION_RUN_TTL_SECS


# ── process A: agentscope's app, until it is killed ──────────────────────


async def process_a(basedir: str, port: str, user: str, agent: str, session: str, card: str) -> None:
    async with RedisMessageBus("127.0.0.1", int(port)) as bus:
        async with app_on(bus, basedir=Path(basedir), book=BOOK, user_id=user) as app:
            app.script("solo").when_empty = (Text("deployed"),)

            async def slow_model(_script: str) -> None:
                print(f"MODEL_ANSWERING GatedAction ran: {len(app.desk.runs('GatedAction'))}", flush=True)
                await asyncio.sleep(600)

            app.book.while_answering = slow_model
            status = await app.post_chat_event(agent, session, confirmation(json.loads(card)))
            print(f"ANSWERED HTTP {status}", flush=True)
            await asyncio.sleep(600)


# ── the script ───────────────────────────────────────────────────────────


async def main() -> int:
    quiet_agentscope()
    try:
        async with redis_server("f19") as server:
            return await crash_while_resuming(server.port, server.folder)
    except (RedisServerUnavailable, SetupFailed, ChildNotReady) as failed:
        say(f"setup failed: {failed}")
        return 2


async def crash_while_resuming(port: int, tmp: Path) -> int:
    """solo parks; process A takes the answer and dies while the resumed
    run's model answers; past every lease, process B starts; 1 if the
    answer is lost."""
    async with RedisMessageBus("127.0.0.1", port) as bus:
        client = bus._client
        async with app_on(bus, basedir=tmp, book=BOOK) as first:
            first.script("solo").add(CallTool("GatedAction", {"note": "deploy"}))
            user = first.user_id
            agent = await first.add_agent("solo")
            session = await first.add_session(agent, "solo")
            card = await park(Node(first), agent, session)
            say(f"1. solo parked: stored calls {await stored_calls(first, agent, session)}")

        say("2. process A takes the user's answer; the resumed run's model is answering")
        async with child_process(
            __file__, str(tmp), str(port), user, agent, session, json.dumps(card), ready="MODEL_ANSWERING",
        ) as (child, said):
            say(f"   process A said: {'; '.join(said)}")
            say(f"   triggers queued: {await client.xlen(MessageBusKeys.wakeup_queue())}")

            say("3. process A is killed")
            child.kill()
            await child.wait()

        say(f"4. {SESSION_RUN_TTL_SECS} s pass (TTLs shortened on the server)")
        await let_time_pass(client, SESSION_RUN_TTL_SECS)

        say("5. process B starts agentscope's app on the same Redis and database")
        async with app_on(bus, basedir=tmp, book=BOOK, user_id=user) as b:
            b.script("solo").when_empty = (Text("deployed"),)
            await asyncio.sleep(2.0)
            await b.settle()
            calls = await stored_calls(b, agent, session)
            triggers = await client.xlen(MessageBusKeys.wakeup_queue())
            runs = len(b.registry._tasks)
            say(f"   stored calls {calls}; triggers queued: {triggers}; runs alive in B: {runs}")

    if calls == ["GatedAction:asking"] and not triggers and not runs:
        say(
            f"CONFIRMED on agentscope {VERSION}: the answer taken with HTTP 200 is lost; "
            "the call is stored asking with no trigger and no run, and the card asks again",
        )
        return 1
    say(f"not reproduced on agentscope {VERSION}")
    return 0


if __name__ == "__main__":
    run_processes(main, process_a)

"""F13: across nodes, a second message to a busy session is accepted, then
fails with an error once the first run parks.

What it shows, on a real redis-server with agentscope's ``RedisMessageBus``
and two nodes (two apps, each with its own bus client, run registry and
dispatchers, sharing the Redis server and the database, as a deployment
behind a load balancer runs):

1. node A takes the user's first message; its model is still answering;
2. the user sends a second message, and the load balancer hands it to
   node B. On node A the chat endpoint would answer 409 (a run is in
   flight); node B's endpoint checks only its own run registry, so it
   answers 200 and spawns a run, which waits for the session lock;
3. node A's model asks for a confirmation: the agent parks and node A's
   run releases the session lock;
4. node B's run takes the lock, finds the agent parked, and publishes
   ``REPLY_END(ERROR)`` ("The session could not be prepared"). The second
   message never reaches the agent; the user was told it was accepted.

On one node the same second message is refused with 409 and can be sent
again; F2 is the same error for a message sent after the agent parked.

Exit 1 when node B accepts the message and its reply ends with ERROR;
0 when it is refused or reaches the agent; 2 when redis-server is missing.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f13_second_message_across_nodes.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, describe, quiet_agentscope, run_script, say  # noqa: E402
from _redis import RedisServerUnavailable, redis_server  # noqa: E402
from agentscope.app.message_bus import RedisMessageBus  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402


async def both_nodes(port: int, basedir: Path) -> int:
    async with RedisMessageBus("127.0.0.1", port) as bus_a, RedisMessageBus("127.0.0.1", port) as bus_b:
        async with app_on(bus_a, basedir=basedir) as a:
            agent = await a.add_agent("leader")
            session = await a.add_session(agent, "leader")
            async with app_on(bus_b, basedir=basedir, book="node-b", user_id=a.user_id) as b:
                ui = await a.tap(session)
                answer = asyncio.Event()
                answering = asyncio.Event()

                async def first_answer_waits(_script: str) -> None:
                    if not answer.is_set():
                        answering.set()
                        await answer.wait()

                a.book.while_answering = first_answer_waits
                a.script("leader").add(CallTool("GatedAction", {"note": "deploy"}), Text("deployed"))

                say("1. node A takes the first message; its model is answering")
                status_a = await a.post_chat(agent, session, "please deploy")
                await asyncio.wait_for(answering.wait(), 10)
                say(f"   node A answered {status_a}; a run holds the session on node A")

                say("2. the second message, on node A and then on node B")
                again_a = await a.post_chat(agent, session, "also, use the staging database")
                say(f"   node A's endpoint answers {again_a}")
                seen = len(ui.events)
                status_b = await b.post_chat(agent, session, "also, use the staging database")
                say(f"   node B's endpoint answers {status_b}; runs alive on node B: {b.run_task(session) is not None}")

                say("3. node A's model asks for a confirmation: the agent parks")
                answer.set()
                await ui.wait_for("REQUIRE_USER_CONFIRM")
                await a.wait_run_done(session)
                await b.wait_run_done(session)
                await a.settle()
                await b.settle()
                after = ui.events[seen:]
                say("4. what the session published after node B accepted the message:")
                for event in after:
                    say(f"   {describe(event)}")
                errors = [e for e in after if e.get("type") == "REPLY_END" and e.get("finished_reason") == "error"]
                parked = await a.parked_status(agent, session)
                say(f"   the agent is parked: {parked}")
                await ui.stop()
    if status_b == 200 and errors:
        say(f"F13 confirmed on agentscope {VERSION}: node B accepted the message "
            "(node A answers 409) and its reply ended with ERROR")
        return 1
    say(f"F13 not reproduced on agentscope {VERSION}")
    return 0


async def main() -> int:
    quiet_agentscope()
    try:
        async with redis_server("f13") as server:
            return await both_nodes(server.port, server.folder)
    except RedisServerUnavailable as missing:
        say(f"setup failed: {missing}")
        return 2


if __name__ == "__main__":
    run_script(main)

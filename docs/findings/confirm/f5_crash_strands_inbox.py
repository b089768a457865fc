"""F5: after a crash, payloads the crashed run was to consume wait forever.

What it shows, on a real redis-server with agentscope's ``RedisMessageBus``
and two app processes sharing it (and one sqlite database):

1. Process A (a child process running agentscope's app: ``ChatService``,
   dispatchers) takes the user's message for ``solo``; its run holds the
   session lock and is registered as the inbox consumer, and its model is
   answering (slowly, as models do).
2. A channel delivers a message into solo's inbox through
   ``deliver_to_inbox``. A consumer is registered, so no wake-up is
   queued: the payload is that run's to take at its turn tail.
3. Process A is killed (SIGKILL: an OOM kill, a redeploy, a lost node).
   Nothing of its run's ``finally`` runs.
4. 600 s pass: the session lock's and the consumer registration's leases
   (``SESSION_RUN_TTL_SECS = 600``) lapse. Time on a real redis-server
   cannot be mocked, so it is simulated: every key's TTL is shortened by
   600 s (``PTTL`` then ``PEXPIRE``, or ``DEL`` at zero), which is what
   600 s passing means to Redis.
5. Process B, the replacement, starts agentscope's app on the same Redis
   and database; its ``WakeupDispatcher`` drains the trigger queue on
   start. It is given 65 s (a sweep interval twice, see ``--with-fix``).

The channel's message is still queued in solo's inbox, no run is alive,
no lock or registration is left and no trigger is queued: nothing will
ever consume it. Only an unrelated later event moves it (step 6, for
information: a second delivery queues a wake-up, and that run drains
both).

Releases: every release from 2.0.7 to 2.0.11 (exit 1 on each).

How the window is hit: by the natural order of events. The payload
arrives while the model is answering (the run is registered as consumer
for its whole length), and the process dies during that model call,
which the child announces on its stdout when it starts. No hook in the
bus; the only stand-in is time, simulated on Redis as above.

Needs ``redis-server`` on PATH (Debian's 7.0.15 works) and the ``redis``
package (agentscope's ``storage-redis`` extra). If the release's
environment lacks it: ``pip install --target DIR redis`` and add DIR to
PYTHONPATH. The script starts its own redis-server on a free loopback
port in a temporary folder and stops it at the end.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f5_crash_strands_inbox.py

``--with-fix`` applies the harness's reference fixes in both processes
first (among them ``inbox-sweeper``: the channel's delivery puts solo on
the bus's inbox watch list, and B's wake-up dispatcher's sweeper, at its
second look 60 s after the start, finds solo listed with no lock, no
registration and a payload waiting, and wakes it): then the message
reaches solo's context within the 65 s and the script exits 0.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import (  # noqa: E402
    VERSION, ChildNotReady, app_on, child_process, hint, quiet_agentscope, run_processes, say,
)
from _redis import RedisServerUnavailable, redis_server  # noqa: E402
from agentscope.app._bus_ops import deliver_to_inbox  # noqa: E402
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus  # noqa: E402

from fakes.model import Text  # noqa: E402

SESSION_RUN_TTL_SECS = MessageBusKeys.SESSION_RUN_TTL_SECS
WITH_FIX = "--with-fix" in sys.argv[1:]


# ── process A: agentscope's app, until it is killed ──────────────────────


async def process_a(basedir: str, port: str, user: str, agent: str, session: str) -> None:
    async with RedisMessageBus("127.0.0.1", int(port)) as bus:
        async with app_on(bus, basedir=Path(basedir), user_id=user) as app:
            app.script("solo").add(Text("on it"))

            async def slow_model(_script: str) -> None:
                print("MODEL_ANSWERING", flush=True)
                await asyncio.sleep(60)

            app.book.while_answering = slow_model
            await app.post_chat(agent, session, "summarise today's tickets")
            await asyncio.sleep(60)


# ── the script ───────────────────────────────────────────────────────────


async def let_time_pass(client, seconds: float) -> None:
    """What ``seconds`` passing means to Redis: every key's TTL shortened
    by that much, keys reaching zero deleted."""
    for key in await client.keys("*"):
        pttl = await client.pttl(key)
        if pttl < 0:  # no TTL
            continue
        left = pttl - int(seconds * 1000)
        if left <= 0:
            await client.delete(key)
        else:
            await client.pexpire(key, left)


async def look(client, session: str) -> dict:
    lock = MessageBusKeys.session_lock(session)
    consumer = MessageBusKeys.inbox_consumer(session)
    return {
        "inbox": await client.xlen(MessageBusKeys.inbox(session)),
        "lock": f"held, {await client.ttl(lock)} s left" if await client.exists(lock) else None,
        "consumer": (
            f"registered, {await client.ttl(consumer)} s left"
            if await client.exists(consumer) else None
        ),
        "wake-ups queued": await client.xlen(MessageBusKeys.wakeup_queue()),
    }


async def main() -> int:
    quiet_agentscope()
    try:
        async with redis_server("f5") as server:
            return await crash_and_restart(server.port, server.folder)
    except (RedisServerUnavailable, ChildNotReady) as missing:
        say(f"setup failed: {missing}")
        return 2


async def crash_and_restart(port: int, tmp: Path) -> int:
    """Process A takes the message and is killed; past every lease,
    process B starts; 1 if the channel's message is stranded."""
    async with RedisMessageBus("127.0.0.1", port) as bus:
        client = bus._client
        async with app_on(bus, basedir=tmp, start_dispatchers=False) as setup:
            user = setup.user_id
            agent = await setup.add_agent("solo")
            session = await setup.add_session(agent, "solo")

        say("1. process A takes the user's message; its model is answering")
        async with child_process(
            __file__, str(tmp), str(port), user, agent, session, ready="MODEL_ANSWERING",
        ) as (child, _):
            say("2. a channel delivers a message to solo's inbox")
            await deliver_to_inbox(
                bus, user_id=user, session_id=session, agent_id=agent,
                payload=hint("new ticket from the support channel", "channel"),
            )
            say(f"   {await look(client, session)}")

            say("3. process A is killed")
            child.kill()
            await child.wait()
        say(f"   {await look(client, session)}")

        say(f"4. {SESSION_RUN_TTL_SECS} s pass (TTLs shortened on the server)")
        await let_time_pass(client, SESSION_RUN_TTL_SECS)
        say(f"   {await look(client, session)}")

        say("5. process B starts agentscope's app on the same Redis and database")
        async with app_on(bus, basedir=tmp, user_id=user) as b:
            await asyncio.sleep(65.0)
            await b.settle()
            stranded = await look(client, session)
            say(f"   65 s on: {stranded}; runs alive in B: {len(b.registry._tasks)}")
            if WITH_FIX:
                context = await b.context_texts(agent, session)
                say(
                    "   the channel's message in solo's context: "
                    f"{'new ticket from the support channel' in context}",
                )

            say("6. (for information) an unrelated later delivery")
            await b.deliver(agent, session, hint("another ticket", "channel"))
            await asyncio.sleep(0.5)
            await b.settle()
            context = await b.context_texts(agent, session)
            say(
                f"   {await look(client, session)}; the first message now in "
                f"solo's context: {'new ticket from the support channel' in context}",
            )

    if stranded["inbox"] and not stranded["lock"] and not stranded["consumer"] \
            and not stranded["wake-ups queued"]:
        say(
            f"CONFIRMED on agentscope {VERSION}: after the crash and past every "
            "lease, the channel's message waited with nothing to consume it",
        )
        return 1
    say(f"not reproduced on agentscope {VERSION}")
    return 0


if __name__ == "__main__":
    run_processes(main, process_a)

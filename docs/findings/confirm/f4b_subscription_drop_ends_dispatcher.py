"""F4b: does a dropped pub/sub connection end the wake-up dispatcher?

A variant of F4, on a real redis-server with agentscope's
``RedisMessageBus``. ``WakeupDispatcher._loop`` is an ``async for`` over
``RedisMessageBus.subscribe`` on the wake-up signal channel, inside a
``try/except Exception`` that logs "loop crashed; subscription ended." and
returns. ``subscribe`` catches only redis' ``TimeoutError`` around
``pubsub.get_message``. So if the subscriber's connection drop surfaces as
``ConnectionError``, the loop ends for good, as in F4. If redis-py's
``PubSub`` reconnects and resubscribes by itself, the loop survives.

The script:

1. Starts redis-server, then agentscope's app on ``RedisMessageBus``, with
   ``WakeupDispatcher`` started as the lifespan starts it. An idle
   session ``solo`` gets a payload through ``deliver_to_inbox``. It must
   be dispatched: a wake-run is spawned and drains the inbox.
2. From another redis client, ``CLIENT KILL TYPE pubsub`` closes every
   subscriber connection, as a failover or network blip does.
3. A: at once, a second payload is delivered to idle solo. 3 s later:
   is the dispatcher's task done (with what exception), was a run
   spawned, and what is left in solo's inbox and in the wake-up queue?
4. B: once the wake-up channel has a subscriber again (``PUBSUB
   NUMSUB``), a third payload is delivered. 3 s later: the same
   questions.
5. C: a session of a second agent, ``leader``, parked on ``ExternalJob``
   before the drop (its model called the external tool; the call is
   ``SUBMITTED`` and its reply has not ended), gets the job's result
   through the chat endpoint, which queues a ``resume`` trigger. 3 s
   later: was a run spawned for it, and does the stored context hold the
   call's result? (The harness's I7, "confirm/resume always completes",
   found by I6's search on 2.0.11: ``counterexamples/I7-2805744a``.)

What happens (2.0.8 and 2.0.11, redis-py 8.1.0, Debian's redis-server
7.0.15): the pending ``get_message`` raises
``redis.exceptions.ConnectionError: Connection closed by server.`` at
once. redis-py's ``PubSub`` reconnects and resubscribes only when its
connection's ``Retry`` allows retries, and ``RedisMessageBus`` builds its
own ``ConnectionPool``, whose connections get ``Retry(NoBackoff(), 0)``
(the ``Redis(...)`` constructor's default of 3 retries does not apply to
a pool built directly). So the error reaches ``_loop``, which logs "loop
crashed; subscription ended." and returns: the task is done, with no
exception on it. No one subscribes to the wake-up channel again. A and B
each queue a trigger and publish a signal nobody reads, no run is
spawned, and both payloads wait in solo's inbox. C's resume is queued
the same way and never read: no run, and the stored call stays
``SUBMITTED`` with no result. The three ``CancelDispatcher`` loops
die the same way (logged too), so stops would go unserved as well; that
is reported, not scripted.

Exit 1 if the dispatcher stopped dispatching for good (its task ended,
or nothing delivered after the kill is ever dispatched, or C's result is
never resumed). Exit 0 if it survived, that is, a delivery after the
kill was dispatched and C's result was resumed. Exit 2 if
the setup failed. Whether the wake-up signal of delivery A is lost while
the subscriber reconnects is reported on its own line.

Window: none is forced. The kill is a real server-side disconnect, and
the deliveries come in natural order after it.

Needs ``redis-server`` on PATH and the ``redis`` package, as F5 does.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f4b_subscription_drop_ends_dispatcher.py

``--with-fix`` applies the harness's reference fixes first (among them
``resubscribe``, which makes each dispatcher loop subscribe again and the
wake-up dispatcher drain once when it has): then the loops survive, both
later deliveries are dispatched, C's call completes and the script exits 0. It also says
whether the cancel dispatcher's three loops still run and are subscribed
(with the fix they must be; this is part of the verdict then).
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, hint, quiet_agentscope, say  # noqa: E402
from _redis import RedisServerUnavailable, redis_server  # noqa: E402
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus  # noqa: E402

from f9_reply_ends_twice import external_job_parked, result_of, stored_call  # noqa: E402
from fakes.model import Text  # noqa: E402


WITH_FIX = "--with-fix" in sys.argv[1:]
if WITH_FIX:
    import reference_fix  # noqa: E402

    FIXES = [p.name for p in reference_fix.apply()]


class CrashLog(logging.Handler):
    """Keeps the "loop crashed" records agentscope logs (and otherwise
    swallows), with the exception that ended each loop (with the fix:
    "subscription failed; resubscribing.")."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.crashes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if ("crashed" in record.getMessage() or "resubscrib" in record.getMessage()) \
                and record.exc_info:
            error = record.exc_info[1]
            kind = f"{type(error).__module__}.{type(error).__qualname__}"
            self.crashes.append(f"{record.getMessage()} <- {kind}: {error}")


def capture_crashes() -> CrashLog:
    log = logging.getLogger("as")
    crash_log = CrashLog()
    if not os.environ.get("CONFIRM_LOGS"):
        log.handlers = []
        log.setLevel(logging.ERROR)
    log.addHandler(crash_log)
    return crash_log


async def cancel_loops_state(dispatcher, admin) -> dict:
    """Each cancel-dispatcher loop: is its task running, and how many
    subscribers its channel has."""
    loops = {
        "session-cancel": (dispatcher._session_task, MessageBusKeys.session_cancel_channel()),
        "task-cancel": (dispatcher._task_cancel_task, MessageBusKeys.task_cancel_channel()),
        "interrupt": (dispatcher._interrupt_task, MessageBusKeys.session_interrupt_channel()),
    }
    return {
        name: (not task.done(), (await admin.pubsub_numsub(channel))[0][1])
        for name, (task, channel) in loops.items()
    }


async def main() -> int:
    quiet_agentscope()
    try:
        async with redis_server("f4b") as server:
            return await drop_subscription(server.port, server.folder, server.admin)
    except RedisServerUnavailable as missing:
        say(f"setup failed: {missing}")
        return 2


async def drop_subscription(port: int, tmp: Path, admin) -> int:
    """The dispatcher's pub/sub connection is dropped; 1 if it never
    dispatches again."""
    say(f"agentscope {VERSION}, redis-server on 127.0.0.1:{port}")
    if WITH_FIX:
        say(f"reference fixes applied: {', '.join(FIXES)}")

    async with RedisMessageBus("127.0.0.1", port) as bus:
        async with app_on(bus, basedir=tmp) as app:
            crash_log = capture_crashes()  # app_on silenced the logger again
            agent = await app.add_agent("solo")
            session = await app.add_session(agent, "solo")
            app.script("solo").when_empty = (Text("noted"),)

            spawned: list[str] = []  # the session of each run spawned
            spawn = app.registry.spawn

            def spawn_and_count(coro, *, session_id, name=None):
                spawned.append(session_id)
                return spawn(coro, session_id=session_id, name=name)

            app.registry.spawn = spawn_and_count  # observation only

            channel = MessageBusKeys.wakeup_signal()

            async def look(when: str) -> dict:
                task = app.dispatcher._task
                state = {
                    "dispatcher task done": task.done(),
                    "runs spawned": spawned.count(session),
                    "solo's inbox": await admin.xlen(MessageBusKeys.inbox(session)),
                    "wake-ups queued": await admin.xlen(MessageBusKeys.wakeup_queue()),
                    "wake-up channel subscribers": (await admin.pubsub_numsub(channel))[0][1],
                }
                if task.done() and not task.cancelled():
                    state["task exception"] = repr(task.exception())
                say(f"{when}: {state}")
                for crash in crash_log.crashes:
                    say(f"   agentscope logged: {crash}")
                crash_log.crashes.clear()
                return state

            await app.deliver(agent, session, hint("first note", "channel"))
            await asyncio.sleep(0.5)
            await app.settle()
            before = await look("1. a delivery before the drop")
            if before["runs spawned"] != 1 or before["solo's inbox"]:
                say("setup failed: the first delivery was not dispatched")
                return 2
            context = await app.context_texts(agent, session)
            if "first note" not in context:
                say("setup failed: the first payload is not in solo's context")
                return 2

            job_agent = await app.add_agent("leader")
            job = await app.add_session(job_agent, "leader")
            job_ui = await app.tap(job)
            ask = await external_job_parked(app, job_agent, job, job_ui, "leader")
            call_id = ask["tool_calls"][0]["id"]
            parked_state, _ = await stored_call(app, job_agent, job, call_id)
            say(f"   leader parked on ExternalJob before the drop: call {parked_state}, "
                f"{len(job_ui.reply_ends())} reply end(s)")
            if job_ui.reply_ends():
                say("setup failed: leader's reply ended before the job's result")
                return 2
            # The tap subscribes too, and would die with the dispatcher's
            # connection; C is read from storage and the run registry.
            await job_ui.stop()

            killed = await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            say(f"2. CLIENT KILL TYPE pubsub closed {killed} subscriber connection(s)")

            await app.deliver(agent, session, hint("second note", "channel"))
            await asyncio.sleep(3.0)
            await app.settle()
            a = await look("3. A: a delivery at once after the drop, 3 s on")
            a_dispatched = a["runs spawned"] > before["runs spawned"]

            for _ in range(100):
                if (await admin.pubsub_numsub(channel))[0][1] or app.dispatcher._task.done():
                    break
                await asyncio.sleep(0.1)
            await app.deliver(agent, session, hint("third note", "channel"))
            await asyncio.sleep(3.0)
            await app.settle()
            b = await look("4. B: a delivery once resubscribed (or 10 s on), 3 s on")
            b_dispatched = b["runs spawned"] > a["runs spawned"]

            job_runs = spawned.count(job)
            await app.post_chat_event(job_agent, job, result_of(ask))
            await asyncio.sleep(3.0)
            await app.settle()
            call_state, results = await stored_call(app, job_agent, job, call_id)
            resumed = spawned.count(job) > job_runs
            say(f"5. C: leader's job result after the drop, 3 s on: resume run spawned: {resumed}; "
                f"stored call {call_state}, its results {results or 'none'}")
            c_completed = resumed and bool(results)

            context = await app.context_texts(agent, session)
            say(
                "   in solo's context: "
                + ", ".join(f"{n}: {n in context}" for n in
                            ("first note", "second note", "third note")),
            )
            if a_dispatched:
                say("   A's wake-up signal reached the dispatcher")
            else:
                say(
                    "   A's wake-up signal was published while no one was subscribed; "
                    "its trigger " + ("was picked up by B's drain" if b_dispatched
                                      and not b["wake-ups queued"] else "still waits"),
                )

            cancel_loops = await cancel_loops_state(app.cancel_dispatcher, admin)
            say(f"   cancel dispatcher's loops (task running, channel subscribers): {cancel_loops}")
            cancel_dead = not all(running and subscribers for running, subscribers in cancel_loops.values())

            dead = b["dispatcher task done"]
            stranded = b["solo's inbox"]
            if WITH_FIX and not dead and (a_dispatched or b_dispatched) and not c_completed:
                say(
                    f"NOT FIXED on agentscope {VERSION}: the wake-up dispatcher survived, "
                    "but leader's job result was never resumed",
                )
                return 1
            if WITH_FIX and cancel_dead and not dead and (a_dispatched or b_dispatched):
                say(
                    f"NOT FIXED on agentscope {VERSION}: the wake-up dispatcher survived, "
                    "but a cancel dispatcher loop did not",
                )
                return 1
            if dead or not (a_dispatched or b_dispatched) or not c_completed:
                seen = []
                if dead or not (a_dispatched or b_dispatched):
                    seen.append("the wake-up dispatcher no longer dispatches; "
                                f"{stranded} payload(s) wait in solo's inbox")
                seen.append("leader's job result " + (
                    "was resumed" if c_completed else f"was never resumed (call {call_state})"))
                say(
                    f"CONFIRMED on agentscope {VERSION}: after the pub/sub connection "
                    "dropped, " + "; ".join(seen),
                )
                return 1
            say(
                f"not reproduced on agentscope {VERSION}: the dispatcher survived the "
                "dropped pub/sub connection, dispatched a later delivery and resumed "
                "leader's job",
            )
            return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

"""F11 (candidate from I9/I10): stop pressed twice while a slow tool runs.

The story, from the harness (2.0.8 and 2.0.11, shrunk to 3 steps): the
user messages ``leader``; its model calls ``BackgroundJob``, an allowed
tool that takes a while, so the run waits in ``ToolOffloadMiddleware``'s
first 10 s wait; the user presses stop twice in a row. With one stop this
is F6: the reply ends ``INTERRUPTED`` and the tool runs on. With two, the
harness saw the second cancel land while the agent was still handling the
first, before anything was published: no ``REPLY_END`` at all for the
reply, then the run's clean-up, and an idle session with a reply that
never ended.

Each press goes through ``interrupt_session``: while the run holds the
session lock it publishes on the interrupt channel, and the
``CancelDispatcher`` calls ``task.cancel()`` on the run task again. A
press that finds the lock free queues a ``resume`` trigger instead.

What the script does, on agentscope's own ``InMemoryMessageBus`` (a
subclass that only counts publishes on the interrupt channel; it delays
nothing): a fresh session per try, its model calls ``BackgroundJob``. The
tool stand-in (``fakes/tool_desk.py``) records when it starts; the script
is told at once.

A. Stop, stop, back to back (the second press sent when the first has
   answered), the moment the tool has started. 10 tries.
B. Both presses sent together (one task each), the moment the tool has
   started. 10 tries.
C. Stop, stop, back to back, 0.5 s into the tool (F6's timing: the run
   is idle in the offload middleware's wait). 10 tries.
D. (the window, with a hook) The same as C, but once stop 1 has
   published, the first event the run writes to the session's events
   (``log_append``, the replay log, which ``publish_session_event`` awaits
   before it publishes) while it handles stop 1's cancel waits until stop
   2 has answered and 50 ms more, so that the cancel dispatcher can read
   stop 2's publish (at most 1 s). On ``RedisMessageBus`` that append is an
   ``XADD`` round trip, and the loop serves stop 2 meanwhile; the hook
   makes the round trip as long as the second request. 10 tries.

Per try it prints: each press's HTTP status and whether it published on
the interrupt channel; the reply's ``REPLY_END`` events after the stops
(with ``finished_reason``) and the other event types; the stored session
state as agentscope derives it (``idle``...); whether the session lock is
still held; whether the run task ended cancelled; whether the tool was
still running after the run ended (then the script lets it finish).

Result (2.0.8 and 2.0.11, exit 0 on each): **not reproduced**. In A, B,
C and D both presses publish on the interrupt channel in 10 of 10 tries,
and every reply ends exactly once, ``REPLY_END(interrupted)``, after the
interrupted call's ``TOOL_RESULT_END``. The session is stored ``idle`` and
its lock is free; the tool runs on in every try (F6). In D stop 2's cancel
lands in the held ``log_append`` in 10 of 10 tries: ``ChatService``'s
event loop catches a ``CancelledError`` that lands in its publish and
re-arms it (``current.cancel()``) for the agent's next ``__anext__``, and
the agent still reaches ``yield end_event``. The harness's story (the
second cancel cuts the agent's interrupt handling short before anything
is published) was not met on the real bus, with or without this hook.
Other places a second cancel could land (inside the toolkit's or the
agent's own handling of the first, between two events) are not held here.

Exit codes: 1 if any try ends the reply zero times or more than once;
0 if every try ends it exactly once; 2 if in no try did both presses
publish on the interrupt channel (the second cancel never reached the
run) and nothing went wrong.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f11_double_stop_during_slow_tool.py
"""
from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, event_type, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

TRIES = 10


class Hold:
    """One held bus call: it waits until ``answered`` is set, or 1 s, and
    notes whether a cancel landed in that wait."""

    def __init__(self) -> None:
        self.answered = asyncio.Event()
        self.held = asyncio.Event()
        self.cancel_landed = False
        self.what = ""

    async def wait(self, what: str) -> None:
        self.what = what
        self.held.set()
        # No asyncio.wait_for: on Python 3.11 it can swallow a cancel.
        asyncio.get_running_loop().call_later(1.0, self.answered.set)
        try:
            await self.answered.wait()
        except asyncio.CancelledError:
            self.cancel_landed = True
            raise


class CountingBus(InMemoryMessageBus):
    """agentscope's in-memory bus; counts publishes on the interrupt
    channel. With ``hold_session`` set (scenario D only): once stop 1 has
    published on the interrupt channel, the next ``log_append`` of an
    event on that session's events (the first event the run writes while
    it handles the cancel) waits for ``hold`` (stop 2's answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupt_publishes = 0
        self.hold_session: str | None = None
        self.hold = Hold()
        self._armed = False

    def arm(self, session: str | None) -> None:
        self.hold_session = session
        self.hold = Hold()
        self._armed = False

    async def publish(self, key: str, payload: dict) -> None:
        if key == MessageBusKeys.session_interrupt_channel():
            self.interrupt_publishes += 1
            if self.hold_session and not self.hold.held.is_set():
                self._armed = True
        await super().publish(key, payload)

    async def log_append(self, key: str, payload: dict, *args, **kwargs):
        if (
            self._armed
            and self.hold_session
            and key == MessageBusKeys.session_events(self.hold_session)
        ):
            self._armed = False
            await self.hold.wait(event_type(payload))
        return await super().log_append(key, payload, *args, **kwargs)


class SignalList(list):
    """The tool desk's event list; calls ``on_append`` for each event."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.listeners: list = []

    def append(self, item) -> None:
        super().append(item)
        for listener in list(self.listeners):
            listener(item)


@dataclass
class Try:
    label: str
    presses: list[str]
    both_published: bool
    ends: list[str]
    after_stop: list[str]
    stored: str
    held: str
    session_locked: bool
    run_cancelled: bool
    tool_running: bool

    @property
    def bad(self) -> bool:
        return len(self.ends) != 1

    def line(self) -> str:
        verdict = {0: "NO REPLY_END", 1: "ended once"}.get(len(self.ends), "ENDED TWICE+")
        return (
            f"   {self.label}: {verdict}: REPLY_END {self.ends or 'none'}; "
            f"presses: {'; '.join(self.presses)}; {self.held}stored state: {self.stored}; "
            f"session lock held: {self.session_locked}; run task cancelled: "
            f"{self.run_cancelled}; tool still running after the run: {self.tool_running}\n"
            f"      events after the stops: {self.after_stop or 'none'}"
        )


async def one_try(app: App, mode: str, number: int) -> Try:
    bus: CountingBus = app.bus
    name = f"leader{mode}{number}"
    note = f"nightly build {mode}{number}"
    agent = await app.add_agent("leader")
    session = await app.add_session(agent, name)
    ui = await app.tap(session)
    app.script(name).add(CallTool("BackgroundJob", {"note": note}), Text("ok"))

    started = asyncio.Event()

    def on_tool(event) -> None:
        if event.kind == "run" and event.args.get("note") == note:
            started.set()

    app.desk.events.listeners.append(on_tool)
    presses: list[str] = []

    async def stop(label: str) -> None:
        before = bus.interrupt_publishes
        status = await app.press_stop(agent, session)
        published = bus.interrupt_publishes > before
        presses.append(
            f"{label} HTTP {status} "
            f"({'published' if published else 'lock free: resume trigger'})",
        )

    await app.post_chat(agent, session, "run the nightly build")
    await started.wait()
    app.desk.events.listeners.remove(on_tool)
    if mode == "C":
        await asyncio.sleep(0.5)
    run = app.registry.get(session)
    mark = len(ui.events)
    publishes_before = bus.interrupt_publishes
    held = ""
    if mode == "D":
        bus.arm(session)
        await stop("stop 1")
        waiter = asyncio.create_task(bus.hold.held.wait())
        await asyncio.wait([waiter, run], timeout=2.0, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        await stop("stop 2")
        # Leave the cancel dispatcher a moment to read stop 2's publish
        # and cancel the run (on Redis the held append and the delivery of
        # the publish are both round trips).
        await asyncio.sleep(0.05)
        bus.hold.answered.set()
        held = (
            f"held the log_append of {bus.hold.what or 'nothing'}, "
            f"stop 2's cancel landed in it: {bus.hold.cancel_landed}; "
        )
        bus.arm(None)
    elif mode == "B":
        await asyncio.gather(stop("stop 1"), stop("stop 2"))
    else:
        await stop("stop 1")
        await stop("stop 2")
    both_published = bus.interrupt_publishes - publishes_before >= 2
    if run is not None:
        await asyncio.gather(run, return_exceptions=True)
    await asyncio.sleep(0.1)
    await app.settle()
    tool_running = note in app.desk.running_jobs(session)

    reply_ids = {
        e.get("reply_id") for e in ui.events[:mark] if event_type(e) == "REPLY_START"
    }
    after = ui.events[mark:]
    ends = [
        str(e.get("finished_reason"))
        for e in ui.events
        if event_type(e) == "REPLY_END" and e.get("reply_id") in reply_ids
    ]
    outcome = Try(
        label=f"{mode}{number}",
        presses=presses,
        both_published=both_published,
        ends=ends,
        after_stop=[describe(e) for e in after],
        held=held,
        stored=await app.parked_status(agent, session),
        session_locked=await bus.is_locked(MessageBusKeys.session_lock(session)),
        run_cancelled=bool(run is not None and run.done() and run.cancelled()),
        tool_running=tool_running,
    )
    app.desk.finish_job(note)
    await asyncio.sleep(0.05)
    await app.settle()
    return outcome


async def main() -> int:
    bus = CountingBus()
    tries: list[Try] = []
    async with app_on(bus) as app:
        app.desk.events = SignalList(app.desk.events)
        scenarios = {
            "A": "stop, stop back to back, the moment the tool has started",
            "B": "stop and stop sent together, the moment the tool has started",
            "C": "stop, stop back to back, 0.5 s into the tool",
            "D": "hook: the first event the run writes after stop 1's cancel is held "
            "until stop 2 has answered",
        }
        for mode, text in scenarios.items():
            say(f"{mode}. {text}, {TRIES} tries")
            batch = [await one_try(app, mode, n) for n in range(1, TRIES + 1)]
            for t in batch:
                say(t.line())
            say(
                f"   {mode}: no REPLY_END in {sum(len(t.ends) == 0 for t in batch)}, "
                f"ended twice or more in {sum(len(t.ends) > 1 for t in batch)}, "
                f"both stops published in {sum(t.both_published for t in batch)}, "
                f"tool left running in {sum(t.tool_running for t in batch)} "
                f"of {TRIES}",
            )
            tries.extend(batch)

    bad = [t for t in tries if t.bad]
    if bad:
        say(
            f"CONFIRMED on agentscope {VERSION}: {len(bad)} of {len(tries)} replies "
            f"did not end exactly once ({', '.join(t.label for t in bad)})",
        )
        return 1
    if not any(t.both_published for t in tries):
        say(f"window missed on agentscope {VERSION}: no second stop reached the run")
        return 2
    say(f"not reproduced on agentscope {VERSION}: every reply ended exactly once")
    return 0


if __name__ == "__main__":
    run_script(main)

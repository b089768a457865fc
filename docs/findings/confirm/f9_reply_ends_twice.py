"""F9 (candidate): a reply parked on an external job ends twice.

The story, from the harness (I10 "every reply ends exactly once", found by
I9's search, 2.0.8 and 2.0.11): the user messages ``leader``; its model
calls ``ExternalJob`` (an external tool, allowed), the call parks
``SUBMITTED`` and the run publishes ``REQUIRE_EXTERNAL_EXECUTION`` and ends.
The user presses stop: no run holds the session lock, so the interrupt
route queues a ``resume`` trigger carrying a ``UserInterruptEvent``. The
external system posts the job's result through the chat endpoint, which
queues a ``resume`` trigger carrying an ``ExternalExecutionResultEvent``
for the same reply. The wake-up dispatcher drains; the user presses stop
three more times; everything settles.

What the script plays, on agentscope's own ``InMemoryMessageBus``. The only
change to the bus (``PausableBus``) holds the wake-up dispatcher's drain
of the trigger queue while B, B2 and D queue their two resumes (the
harness's "the dispatcher drains its queue" step), and records a timeline
(reply events, stops published to a live run, and each run's ``_persist``,
seen as its ``log_trim``). No call is delayed once the drain is released.

A. stop, settle, the result, settle, then three more stops, each after a
   settle.
B. stop and the result both queued, then the dispatcher drains (the
   harness's order), then three stops, each after a settle.
B2. B with the result queued first.
C. (control) the result, settle, stop, settle, three more stops.
D. B and B2 with stops 2 to 4 pressed back to back the moment the UI
   receives the first ``REPLY_END`` (and, for comparison, stop 2 alone),
   10 times each. This is the natural race; nothing is held.

Result (2.0.8 and 2.0.11, exit 1 on each). In A, B, B2 and C the reply
ends exactly once: the first resume to run ends it (``interrupted`` for
the stop, ``completed`` for the result), and the other resume finds
nothing to do. A stop's resume on a reply that is no longer parked is a
silent no-op; a result's resume fails ``_check_incoming_event`` and
``_close_failed_reply`` stays silent because the reply already ended.
(Each such resume still publishes a continuation ``REPLY_START`` that no
``REPLY_END`` follows, which is not counted here.)
In D, with three stops, a reply ends twice in about half the tries:
``interrupted`` then ``interrupted`` or ``interrupted`` then
``completed`` (B's order), ``completed`` then ``interrupted`` (B2's order).
The timeline shows why, each time: the
first resume-run publishes its ``REPLY_END`` and is still in its turn tail
holding the session lock, stops 2 and 3 both reach it (two cancels), and
the run makes **no** ``_persist``. That is F8's mechanism: the second cancel
cuts ``_run_impl``'s ``finally`` short inside the unshielded
``abandon_inbox_consumer``, before the shielded ``_persist`` is created.
The stored state is still the parked one (``ExternalJob`` ``SUBMITTED``),
so whichever resume runs next on it finds an awaiting call and ends the
same reply again: stop 4's (the lock is free by then) ends it
``INTERRUPTED`` and writes an "interrupted" result for the job, or, in B's
order, the retried result's resume applies the result and ends it
``completed`` after the user saw it interrupted. In B2's order the job's real result and the model's completed
answer, both shown to the user, are gone from the stored context, which
says the job was interrupted. With stop 2 alone (one cancel), no reply ends
twice in 10 tries.

So the candidate is real as a user-visible symptom: the UI shows one reply
end twice (completed, then interrupted), and the stored conversation
contradicts what was shown. Its cause is F8's, not a separate flaw in how
agentscope orders a stop's resume against an external result's resume.

Exit codes: 1 if in A, B, B2 or D some reply_id has more than one
``REPLY_END``; 2 if no reply ended twice and in D no two stops ever
reached a live run (the window was missed); 0 otherwise.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f9_reply_ends_twice.py
"""
from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ExternalExecutionResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock, ToolResultBlock  # noqa: E402
from agentscope.message import ToolResultState  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402


@dataclass
class Outcome:
    steps: list[str]
    ends: list[tuple[str, str]]
    """(reply_id, finished_reason) of every ``REPLY_END``, in order."""
    lifecycle: list[str]
    call_state: str
    results: list[str]
    parked: str
    timeline: list[str]
    """After parking: reply events, stops published to a live run (its
    cancel), and each run's ``_persist``."""

    def doubled(self) -> list[str]:
        counts = Counter(reply for reply, _ in self.ends)
        return [reply for reply, n in counts.items() if n > 1]

    def report(self) -> None:
        say(f"   steps: {'; '.join(self.steps)}")
        say(f"   reply events on the UI's stream: {self.lifecycle}")
        for reply, reason in self.ends:
            say(f"   REPLY_END reply_id={reply} finished_reason={reason}")
        say(f"   stored ExternalJob call: state={self.call_state}; "
            f"results in the context: {self.results or 'none'}")
        say(f"   after parking: {self.timeline}")
        say(f"   session at the end: {self.parked}")
        doubled = self.doubled()
        say(f"   replies ended more than once: {doubled or 'none'}")


def short(reply_id: str) -> str:
    return reply_id[:8]


async def external_job_parked(app: App, agent: str, session: str, ui, script: str) -> dict:
    """The user's message; the run parks on ``ExternalJob`` and ends."""
    app.script(script).add(
        CallTool("ExternalJob", {"note": "build the report"}),
        Text("the report is built"),
    )
    await app.post_chat(agent, session, "please build the report")
    ask = await ui.wait_for("REQUIRE_EXTERNAL_EXECUTION")
    await app.settle()
    return ask


def result_of(ask: dict) -> ExternalExecutionResultEvent:
    calls = [ToolCallBlock.model_validate(c) for c in ask["tool_calls"]]
    return ExternalExecutionResultEvent(
        reply_id=ask["reply_id"],
        execution_results=[
            ToolResultBlock(
                id=call.id,
                name=call.name,
                output="the job finished",
                state=ToolResultState.SUCCESS,
            )
            for call in calls
        ],
    )


async def stored_call(app: App, agent: str, session: str, call_id: str) -> tuple[str, list[str]]:
    """The ``ExternalJob`` call's stored tool-call state and the result
    blocks the stored context holds for it."""
    record = await app.storage.get_session(app.user_id, agent, session)
    state = "?"
    for msg in record.state.context:
        for block in msg.get_content_blocks("tool_call"):
            if block.id == call_id:
                state = str(getattr(block, "state", "?"))
    results = []
    for msg in record.state.context:
        for block in msg.get_content_blocks("tool_result"):
            if block.id == call_id:
                output = block.output
                if isinstance(output, list):
                    output = " ".join(getattr(b, "text", str(b)) for b in output)
                results.append(f"{getattr(block, 'state', '?')}: {str(output)[:60]!r}")
    return state, results


async def play(app: App, order: str, script: str, later: str = "settled") -> Outcome:
    agent = await app.add_agent("leader")
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    ask = await external_job_parked(app, agent, session, ui, script)
    call_id = ask["tool_calls"][0]["id"]
    app.bus.timeline = []
    steps = [f"parked on ExternalJob (reply {short(ask['reply_id'])})"]

    async def stop(label: str) -> None:
        status = await app.press_stop(agent, session)
        steps.append(f"{label} HTTP {status}")

    async def result() -> None:
        status = await app.post_chat_event(agent, session, result_of(ask))
        steps.append(f"result HTTP {status}")

    if order == "stop, then result":
        await stop("stop")
        await app.settle()
        await result()
        await app.settle()
    elif order == "stop + result back to back":
        await stop("stop")
        await result()
        await app.settle()
    elif order == "result, then stop":
        await result()
        await app.settle()
        await stop("stop")
        await app.settle()
    elif order.startswith("held:"):
        # The dispatcher holds its drain; both resumes are queued, in the
        # order given, and then it drains.
        app.bus.resumed.clear()
        first, second = order.split(":")[1].split(",")
        for step in (first, second):
            await (stop("stop") if step == "stop" else result())
        steps.append("the dispatcher drains")
        app.bus.resumed.set()
        # Let the drain's spawn happen before the user presses again.
        await asyncio.sleep(0)
    if later == "settled":
        await app.settle()
        for n in (2, 3, 4):
            await stop(f"stop {n}")
            await app.settle()
    elif later == "back to back":
        for n in (2, 3, 4):
            await stop(f"stop {n}")
        await app.settle()
    elif later == "once on REPLY_END":
        await ui.wait_for("REPLY_END")
        await stop("stop 2")
        await app.settle()
    elif later == "on REPLY_END":
        await ui.wait_for("REPLY_END")
        for n in (2, 3, 4):
            await stop(f"stop {n}")
        await app.settle()
    await asyncio.sleep(0.3)
    await app.settle()
    state, results = await stored_call(app, agent, session, call_id)
    return Outcome(
        steps=steps,
        ends=[(short(e.get("reply_id", "")), str(e.get("finished_reason"))) for e in ui.reply_ends()],
        lifecycle=[
            f"{describe(e)} ({short(e.get('reply_id', ''))})"
            for e in ui.events
            if e.get("type") in ("REPLY_START", "REPLY_END", "REQUIRE_EXTERNAL_EXECUTION",
                                 "EXTERNAL_EXECUTION_RESULT")
        ],
        call_state=state,
        results=results,
        parked=await app.parked_status(agent, session),
        timeline=list(app.bus.timeline),
    )


async def main() -> int:
    counted: list[tuple[str, Outcome]] = []
    async with app_on(app_bus()) as app:
        for name, order, title in (
            ("A", "stop, then result", "stop, settle, the result, settle"),
            ("B", "held:stop,result", "stop and the result queued, then the dispatcher drains (the harness's order)"),
            ("B2", "held:result,stop", "the result and stop queued, then the dispatcher drains"),
        ):
            say(f"{name}. {title}; then stop three more times, each after a settle")
            outcome = await play(app, order, f"leader-{name}")
            outcome.report()
            counted.append((name, outcome))

        say("C. (control) the result, settle, stop, settle; then three more stops")
        play_c = await play(app, "result, then stop", "leader-C")
        play_c.report()

        say("D. no hook after the drain: stops 2-4 pressed back to back the moment the UI")
        say("   receives REPLY_END (or stop 2 alone), 10 times each")
        n = 0
        windows = 0
        for order in ("held:stop,result", "held:result,stop"):
            for later in ("on REPLY_END", "once on REPLY_END"):
                doubled = []
                hits = 0
                for _ in range(10):
                    n += 1
                    o = await play(app, order, f"leader-D{n}", later)
                    hits += o.timeline.count("stop -> cancel") >= 2
                    if o.doubled():
                        doubled.append(o)
                windows += hits
                say(f"   {order[5:]}, stops {later}: a reply ended twice in {len(doubled)} of 10 "
                    f"(two stops reached a live run in {hits})")
                if doubled:
                    counted.append((f"D {order[5:]}, {later}", doubled[0]))
                    doubled[0].report()

    bad = [(name, o) for name, o in counted if o.doubled()]
    if bad:
        for name, o in bad:
            say(f"CONFIRMED on agentscope {VERSION} ({name}): reply "
                f"{', '.join(o.doubled())} ended more than once: {o.ends}")
        return 1
    if not windows:
        say(f"window missed on agentscope {VERSION}: in D no two stops reached a live run")
        return 2
    say(f"not reproduced on agentscope {VERSION}: every reply ended once")
    return 0


class PausableBus(InMemoryMessageBus):
    """agentscope's in-memory bus, except that while ``paused`` is set the
    wake-up dispatcher's drain of the trigger queue waits until it is
    cleared (the harness's "the dispatcher drains its queue" step).
    Unpaused, every call goes straight to ``InMemoryMessageBus``."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.timeline: list[str] = []
        """Reply events, stops that reached a run, and each run's
        ``_persist`` (its ``log_trim`` of the session's events)."""

    async def publish(self, key: str, payload: dict) -> None:
        if key == MessageBusKeys.session_interrupt_channel():
            self.timeline.append("stop -> cancel")
        elif payload.get("type") in ("REPLY_START", "REPLY_END"):
            self.timeline.append(
                f"{payload['type']}"
                + (f" {payload.get('finished_reason')}" if payload.get("finished_reason") else ""),
            )
        await super().publish(key, payload)

    async def log_trim(self, *args, **kwargs):
        self.timeline.append("_persist")
        return await super().log_trim(*args, **kwargs)

    async def queue_drain(self, key: str, max_count: int = 100):
        if key == MessageBusKeys.wakeup_queue():
            await self.resumed.wait()
        return await super().queue_drain(key, max_count)


def app_bus() -> PausableBus:
    return PausableBus()


if __name__ == "__main__":
    run_script(main)

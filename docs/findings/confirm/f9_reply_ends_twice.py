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

What the script plays, on agentscope's own ``InMemoryMessageBus``, with no
hook (every bus call goes straight to ``InMemoryMessageBus``):

A. (the exit code) stop first, then the result, each step after the
   previous has settled, then three more stops, each after a settle.
B. (counted as well) stop and result back to back, both ``resume``
   triggers queued before the dispatcher has run either (the harness's
   order: the dispatcher drains its queue afterwards), then three stops.
C. (control, information) the result first, then stop, then three stops.
   The reply should end once, ``completed``.

For each it prints the session's ``REPLY_START`` / ``REPLY_END`` events
as the UI's stream received them (reply_id, finished_reason), the stored
state of the ``ExternalJob`` call (its tool-call state, and the result
blocks the stored context holds for it), and the session's parked status.

Exit codes: 1 if in A or B some reply_id has more than one ``REPLY_END``;
0 otherwise.

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

from _app import VERSION, App, app_on, describe, say  # noqa: E402
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


async def play(app: App, order: str, script: str) -> Outcome:
    agent = await app.add_agent("leader")
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    ask = await external_job_parked(app, agent, session, ui, script)
    call_id = ask["tool_calls"][0]["id"]
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
    )


async def main() -> int:
    counted: list[tuple[str, Outcome]] = []
    async with app_on(app_bus()) as app:
        for name, order, count in (
            ("A", "stop, then result", True),
            ("B", "stop + result back to back", True),
            ("C", "result, then stop", False),
        ):
            say(f"{name}. {order}, then stop three more times (control)" if not count
                else f"{name}. {order}, then stop three more times")
            outcome = await play(app, order, f"leader-{name}")
            outcome.report()
            if count:
                counted.append((name, outcome))

    bad = [(name, o) for name, o in counted if o.doubled()]
    if bad:
        for name, o in bad:
            say(f"CONFIRMED on agentscope {VERSION} ({name}): reply "
                f"{', '.join(o.doubled())} ended more than once: {o.ends}")
        return 1
    say(f"not reproduced on agentscope {VERSION}: every reply ended once")
    return 0


def app_bus():
    from agentscope.app.message_bus import InMemoryMessageBus

    return InMemoryMessageBus()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

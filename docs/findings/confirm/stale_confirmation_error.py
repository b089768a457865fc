"""A stale confirmation (an answer whose call a stop already closed) ends a
later parked reply in ``REPLY_END(ERROR)`` "unknown".

The story, from the harness (I1-2c08bfd3, found on 2.0.8 with every
reference fix applied): session ``solo``; a background task delivers to
its inbox; the user's message makes solo's model call ``GatedAction``
(``ASKING``, card shown); the user denies it (the chat endpoint queues a
``resume`` trigger carrying the ``UserConfirmResultEvent``); the user
presses stop; a team member delivers; stop again; the user's new message
makes the model call ``ExternalJob`` (``SUBMITTED``). The denial's trigger
is run last: its call is no longer pending and the session is parked on
another call of a new reply. That run publishes ``USER_CONFIRM_RESULT``,
``REPLY_START`` and ``REPLY_END(ERROR)`` "unknown: The reply failed with an
unknown error." with no fault injected (I1).

Where agentscope raises it. ``ChatService._run_impl``'s Case B loads the
*current* reply (``agent.state.reply_id``, the new parked reply), appends
the event to it, publishes the event and a continuation ``REPLY_START``,
and calls ``agent.reply_stream(inputs=event)``.
``Agent.reply_stream`` (through ``_reply_impl``)
calls ``_check_incoming_event`` (agent/_agent.py line 1080 on 2.0.8, 1099
on 2.0.11), which finds no ``ASKING`` call and raises
``ValueError("Agent is not waiting for user confirmation, but received
UserConfirmResultEvent: ...")``: the ``raise`` is at agent/_agent.py line
1900 on 2.0.8 and line 1893 on 2.0.11 (the script prints the frame from
agentscope's own ``logger.exception`` record). Case B's ``except
Exception`` hands it to ``_close_failed_reply`` (app/_service/_chat.py
line 1338 on 2.0.8, 1413 on 2.0.11), which publishes ``REPLY_END(ERROR)``
on the new reply, classified ``unknown``, and logs "Reply failed for
session ..." (line 463 / 485). Nothing checks a confirmation against the
pending calls before a run is started: the chat route queues any
``UserConfirmResultEvent``, the dispatcher runs it. When the session is
idle instead (the stop's reply ended, nothing new parked),
``_close_failed_reply`` finds the reply finished and only logs "Post-reply
failure": a continuation ``REPLY_START`` with no ``REPLY_END`` (D0).
Upstream: issue agentscope-ai/agentscope#2778 ("stale HITL confirmation
can resume a resolved reply", open, triage/confirmed; the same
``ValueError``) and PR #2779 (open), whose changes include rejecting a
stale confirmation event once its call has been resolved.

What the script shows, on agentscope's own ``InMemoryMessageBus``, each
step settled:

A. (control) the story's steps in its order, each settled: the denial is
   applied while the call is pending (the model answers, the reply ends
   ``completed``); later stops and the new message behave.
B. (f9's hold) the dispatcher's drain held while the denial and stop 1 are
   both queued, then released: the denial is taken first, the stop finds
   nothing to close.
C. (the harness's order) the denial reaches the dispatcher while the
   parked run still holds the session lock (its turn tail's inbox-lock
   acquire is held until the dispatcher has put the denial into its 0.1 s
   retry), and stop 1 is pressed there too (its cancel lands in the held
   acquire). The retry's re-enqueue of the denial is held until step 7 has
   settled; then it is released.
C2. C, but stop 1 is pressed once the parked run has released the session
   lock (inside the denial's backoff), so it queues a ``resume`` carrying
   a ``UserInterruptEvent`` that is taken before the denial.
D. No hook at all: park, stop (settled, the reply ends ``interrupted``),
   a new message parks on ``ExternalJob`` (settled); then the old card's
   denial is posted (a second tab, the channel's card, the Web UI's stale
   card of #2778). Then (information) the job's result is posted.
D0. (information) D without the new message: the stale denial on an idle
   session.

How the window is hit. B: an ``InMemoryMessageBus`` subclass holds the
wake-up dispatcher's ``queue_drain`` while both triggers are queued. C,
C2: the same subclass holds (1) the parked run's first acquire of solo's
inbox lock once ``REQUIRE_USER_CONFIRM`` is published (its turn tail; on
Redis a ``SET NX PX`` round trip with the session lock held) until the
dispatcher has found the lock held and scheduled the denial's retry (C:
or the stop's cancel lands there; at most 2 s), and (2) the dispatcher's
``resume-retry`` re-enqueue of the ``UserConfirmResultEvent`` (after its
0.1 s backoff; on Redis a round trip) until step 7 has settled. Hold (2)
only stretches the 0.1 s backoff: D shows that the same answer, arriving
late for any reason, does the same with no hook.

Result. Exit codes (exit 1 = a ``REPLY_END(ERROR)`` seen), each run about
15 s:

    agentscope 2.0.8               1    (C, C2, D)
    agentscope 2.0.8  --with-fix   0    (stale-decisions drops the denial)
    agentscope 2.0.11              1    (C, C2, D)
    agentscope 2.0.11 --with-fix   0

On all four runs A and B end no reply in ``ERROR`` (the denial is applied
while its call is pending; the stops after it each publish a continuation
``REPLY_START`` with no ``REPLY_END``, F9's note). In C, C2 and D the stale
denial's run publishes ``USER_CONFIRM_RESULT`` (the old reply's id),
``REPLY_START`` and ``REPLY_END(ERROR)`` "unknown: The reply failed with an
unknown error." on the reply parked on ``ExternalJob`` (the new reply's id,
not the denied call's), from the ``ValueError`` above; the stored
``ExternalJob`` call stays ``submitted``. In C without the fix stop 1 is
lost (F3: its cancel lands in the turn tail), the team member's wake-up is
skipped (parked), and stop 2 closes the ``GatedAction`` call (``REPLY_END
interrupted``); with the fix (``stop-after-parking``) stop 1 closes it.
Either way the denial is stale when it runs. In C2 and D stop 1 closes it
on every run. In D the job's result posted after the ``ERROR`` is still
applied (the call was left ``SUBMITTED``) and the same reply ends a second
time, ``completed``. D0: ``USER_CONFIRM_RESULT`` + ``REPLY_START``, no
``REPLY_END``. So the behaviour is agentscope's own, on the released code
of both releases; no reference fix produces it or removes it (none checks
a confirmation against the pending calls), so no fix was applied alone.

Exit codes: 1 when a ``REPLY_END(ERROR)`` is published in any scenario,
0 when none is, 3 on an error of the script's own.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/stale_confirmation_error.py [--with-fix]
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, hint, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import (  # noqa: E402
    ConfirmResult,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
)
from agentscope.message import ToolCallBlock, ToolResultBlock, ToolResultState  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402


# ── agentscope's own account of the failure ─────────────────────────────


class Caught(logging.Handler):
    """agentscope's ``logger.exception`` records (``as`` logger): where the
    exception it swallowed was raised, and where it was caught."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        where = f"{_short(record.pathname)}:{record.lineno} ({record.funcName})"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            frames = traceback.extract_tb(record.exc_info[2])
            raised = frames[-1] if frames else None
            at = f"{_short(raised.filename)}:{raised.lineno} ({raised.name})" if raised else "?"
            self.records.append(
                f"{text[:70]!r} logged at {where}; {type(error).__name__} raised at {at}: "
                f"{str(error)[:90]}",
            )
        else:
            self.records.append(f"{text[:90]!r} logged at {where}")


def _short(path: str) -> str:
    marker = f"{os.sep}agentscope{os.sep}"
    return "agentscope/" + path.split(marker, 1)[1] if marker in path else path


def listen_to_agentscope() -> Caught:
    caught = Caught()
    log = logging.getLogger("as")
    log.setLevel(logging.ERROR)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
    log.addHandler(caught)
    return caught


# ── the bus ────────────────────────────────────────────────────────────


class StaleBus(InMemoryMessageBus):
    """agentscope's in-memory bus with three holds, each off unless armed:

    - ``drain_open`` cleared: the wake-up dispatcher's drain of the trigger
      queue waits until it is set (f9's hold);
    - ``tail_armed``: once ``REQUIRE_USER_CONFIRM`` is published on a
      session's events, its next acquire of that session's inbox lock (the
      parked run's turn tail) waits until ``tail_release`` is set or 2 s
      pass, noting whether a cancel landed in the wait;
    - ``retry_armed``: the dispatcher's ``resume-retry`` re-enqueue of a
      ``UserConfirmResultEvent`` waits until ``retry_release`` is set.
    """

    def __init__(self) -> None:
        super().__init__()
        self.drain_open = asyncio.Event()
        self.drain_open.set()
        self.reset()

    def reset(self) -> None:
        self.tail_armed = False
        self.tail_held = asyncio.Event()
        self.tail_release = asyncio.Event()
        self.tail_cancelled = False
        self.carded: str | None = None
        self.retry_armed = False
        self.retry_held = asyncio.Event()
        self.retry_release = asyncio.Event()
        self.retry_task: asyncio.Task | None = None

    async def publish(self, key: str, payload: dict) -> None:
        if self.tail_armed and payload.get("type") == "REQUIRE_USER_CONFIRM":
            self.carded = key.rsplit(":", 1)[-1]
        await super().publish(key, payload)

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        if self.tail_armed and self.carded and key == MessageBusKeys.inbox_lock(self.carded):
            self.tail_armed = False
            self.tail_held.set()
            asyncio.get_running_loop().call_later(2.0, self.tail_release.set)
            try:
                await self.tail_release.wait()
            except asyncio.CancelledError:
                self.tail_cancelled = True
                raise
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield

    async def queue_push(self, key: str, *args, **kwargs):
        payload = args[0] if args else kwargs.get("payload")
        task = asyncio.current_task()
        if (
            self.retry_armed
            and key == MessageBusKeys.wakeup_queue()
            and task is not None
            and task.get_name().startswith("resume-retry:")
            and isinstance(payload, dict)
            and "confirm_results" in (payload.get("input") or {})
        ):
            self.retry_armed = False
            self.retry_task = task
            self.retry_held.set()
            await self.retry_release.wait()
        return await super().queue_push(key, *args, **kwargs)

    async def queue_drain(self, key: str, max_count: int = 100):
        if key == MessageBusKeys.wakeup_queue():
            await self.drain_open.wait()
        return await super().queue_drain(key, max_count)


async def settle(app: App, quiet: float = 0.25, timeout: float = 15.0) -> None:
    """``App.settle``, except that the dispatcher's retry held by the bus
    does not count as busy."""
    await app.settle(quiet, timeout, ignore=(app.bus.retry_task,))


async def until(condition, timeout: float = 3.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


# ── the story ──────────────────────────────────────────────────────────


def short(reply_id: str) -> str:
    return (reply_id or "")[:8]


@dataclass
class Outcome:
    steps: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    after_stale: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    gated_reply: str = ""
    job_reply: str = ""
    calls: list[str] = field(default_factory=list)
    window: str = ""
    extra: list[str] = field(default_factory=list)

    def report(self) -> None:
        say(f"   steps: {'; '.join(self.steps)}")
        if self.window:
            say(f"   window: {self.window}")
        say(f"   GatedAction reply {short(self.gated_reply)}, ExternalJob reply "
            f"{short(self.job_reply) or '(none)'}")
        say(f"   reply events: {self.events}")
        say(f"   after the stale answer: {self.after_stale or 'nothing'}")
        say(f"   stored tool calls at the end: {self.calls or 'none'}")
        for line in self.extra:
            say(f"   {line}")
        for e in self.errors:
            whose = ("the ExternalJob reply" if e.get("reply_id") == self.job_reply
                     else "the GatedAction reply" if e.get("reply_id") == self.gated_reply
                     else "another reply")
            say(f"   REPLY_END(ERROR) on {whose} ({short(e.get('reply_id'))}): {describe(e)}")


def lifecycle(ui, start: int = 0) -> list[str]:
    return [
        f"{describe(e)} {short(e.get('reply_id', ''))}"
        for e in ui.events[start:]
        if e.get("type") in ("REPLY_START", "REPLY_END", "USER_CONFIRM_RESULT",
                             "REQUIRE_USER_CONFIRM", "REQUIRE_EXTERNAL_EXECUTION")
    ]


def denial(ask: dict) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(
        reply_id=ask["reply_id"],
        confirm_results=[
            ConfirmResult(confirmed=False, tool_call=ToolCallBlock.model_validate(c))
            for c in ask["tool_calls"]
        ],
    )


def job_result(ask: dict) -> ExternalExecutionResultEvent:
    return ExternalExecutionResultEvent(
        reply_id=ask["reply_id"],
        execution_results=[
            ToolResultBlock(id=c["id"], name=c["name"], output="the job finished",
                            state=ToolResultState.SUCCESS)
            for c in ask["tool_calls"]
        ],
    )


async def stored_calls(app: App, agent: str, session: str) -> list[str]:
    out = []
    for msg in await app.context(agent, session):
        for block in msg.get_content_blocks("tool_call"):
            state = getattr(block, "state", None)
            out.append(f"{block.name}:{getattr(state, 'value', state)}")
    return out


async def play(app: App, mode: str) -> Outcome:
    bus: StaleBus = app.bus
    bus.reset()
    o = Outcome()
    name = f"solo-{mode}"
    agent = await app.add_agent("solo")
    session = await app.add_session(agent, name)
    ui = await app.tap(session)
    script = app.script(name)

    def turn(*turns) -> None:
        script.turns.clear()
        script.add(*turns)

    async def stop(label: str) -> None:
        o.steps.append(f"{label} HTTP {await app.press_stop(agent, session)}")

    async def deny(ask: dict) -> None:
        o.steps.append(f"deny HTTP {await app.post_chat_event(agent, session, denial(ask))}")

    # 1. a background task delivers to idle solo (a wake-run answers it)
    turn(Text("noted the background result"))
    await app.deliver(agent, session, hint("background task: report ready", "background task"))
    await settle(app)
    o.steps.append("background delivery")

    # 2. the user's message; the model calls GatedAction (card)
    turn(CallTool("GatedAction", {"note": "deploy"}), Text("not deploying, then"))
    if mode in ("C", "C2"):
        bus.tail_armed = True
        bus.retry_armed = True
    o.steps.append(f"message HTTP {await app.post_chat(agent, session, 'please deploy')}")
    ask = await ui.wait_for("REQUIRE_USER_CONFIRM")
    o.gated_reply = ask["reply_id"]

    # 3, 4: the denial and stop 1
    if mode == "A":
        await settle(app)
        await deny(ask)
        await settle(app)
        await stop("stop 1")
        await settle(app)
    elif mode == "B":
        await settle(app)
        bus.drain_open.clear()
        await deny(ask)
        await stop("stop 1")
        o.steps.append("the dispatcher drains")
        bus.drain_open.set()
        await settle(app)
    elif mode in ("C", "C2"):
        await asyncio.wait_for(bus.tail_held.wait(), 5.0)
        await deny(ask)
        bounced = await until(lambda: any(
            t.get_name().startswith("resume-retry:") for t in app.dispatcher._retry_tasks))
        o.window = f"the denial found the session lock held and went into the retry: {bounced}"
        if mode == "C":
            await stop("stop 1 (turn tail held)")
            await until(lambda: app.run_task(session) is None)
            o.window += f"; stop 1's cancel landed in the turn tail: {bus.tail_cancelled}"
        else:
            bus.tail_release.set()
            await until(lambda: app.run_task(session) is None)
            locked = await bus.is_locked(MessageBusKeys.session_lock(session))
            await stop("stop 1 (lock released)")
            o.window += f"; session lock held at stop 1: {locked}"
        await until(lambda: bus.retry_held.is_set(), 2.0)
        o.window += f"; the denial's re-enqueue held: {bus.retry_held.is_set()}"
        await settle(app)
    elif mode in ("D", "D0"):
        await settle(app)
        await stop("stop 1")
        await settle(app)

    if mode != "D0":
        # 5. a team member delivers; 6. stop 2; 7. a new message parks on ExternalJob
        if mode != "D":
            turn(Text("noted the teammate"))
            await app.deliver(agent, session, hint("teammate: staging is ready", "team member"))
            await settle(app)
            o.steps.append("team member delivery")
            await stop("stop 2")
            await settle(app)
        turn(CallTool("ExternalJob", {"note": "build the report"}), Text("the report is built"))
        seen = len(ui.events)
        o.steps.append(f"new message HTTP {await app.post_chat(agent, session, 'build the report')}")
        await settle(app)
        job = next((e for e in ui.events[seen:] if e.get("type") == "REQUIRE_EXTERNAL_EXECUTION"), None)
        o.job_reply = job["reply_id"] if job else ""
    else:
        job = None

    # the stale answer
    start = len(ui.events)
    if mode in ("C", "C2"):
        o.steps.append("the held denial is re-enqueued")
        bus.retry_release.set()
    elif mode in ("D", "D0"):
        await deny(ask)
    await asyncio.sleep(0.3)
    await settle(app)
    o.after_stale = lifecycle(ui, start) if mode in ("C", "C2", "D", "D0") else []

    if mode == "D" and job is not None:
        mark = len(ui.events)
        o.steps.append(f"job result HTTP {await app.post_chat_event(agent, session, job_result(job))}")
        await asyncio.sleep(0.3)
        await settle(app)
        o.extra.append(f"(information) after the job's result: {lifecycle(ui, mark) or 'nothing'}")

    o.events = lifecycle(ui)
    o.errors = [e for e in ui.reply_ends() if e.get("finished_reason") == "error"]
    o.calls = await stored_calls(app, agent, session)
    return o


SCENARIOS = (
    ("A", "control: the story's steps in order, each settled"),
    ("B", "the dispatcher's drain held while the denial and stop 1 are queued"),
    ("C", "the harness's order: denial and stop 1 while the parked run holds the lock in its "
          "turn tail; the denial's retry held until the new reply has parked"),
    ("C2", "C, stop 1 once the parked run has released the lock"),
    ("D", "no hook: park, stop, a new message parks on ExternalJob; then the old card's denial"),
    ("D0", "(information) D without the new message: the stale denial on an idle session"),
)


async def main() -> int:
    seen_error: list[str] = []
    async with app_on(StaleBus()) as app:
        caught = listen_to_agentscope()
        for mode, title in SCENARIOS:
            say(f"{mode}. {title}")
            first = len(caught.records)
            o = await play(app, mode)
            o.report()
            for line in caught.records[first:]:
                if "Reply failed" in line or "Post-reply failure" in line:
                    say(f"   agentscope: {line}")
            if o.errors:
                seen_error.append(mode)
    if seen_error:
        say(f"CONFIRMED on agentscope {VERSION}: a REPLY_END(ERROR) with no fault injected in "
            f"{', '.join(seen_error)}")
        return 1
    say(f"not reproduced on agentscope {VERSION}: no reply ended in ERROR")
    return 0


def entry() -> None:
    try:
        if "--with-fix" in sys.argv[1:]:
            import reference_fix

            print("reference fixes applied:", ", ".join(p.name for p in reference_fix.apply()))
        code = asyncio.run(main())
    except Exception:  # noqa: BLE001 - the script's own error
        traceback.print_exc()
        code = 3
    sys.exit(code)


if __name__ == "__main__":
    entry()

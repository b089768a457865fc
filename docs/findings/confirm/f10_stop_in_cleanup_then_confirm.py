"""F10 (candidate from I7): one stop in a parked run's clean-up, then the
user confirms.

The story, from the harness (2.0.8 and 2.0.11, shrunk to 5 steps): the user
messages ``solo``, whose model calls ``GatedAction``; the call parks
(``ASKING``, ``REQUIRE_USER_CONFIRM`` published). While the model was
answering, a team member delivered a payload to ``solo``'s inbox; the run
was registered as the inbox consumer, so no wake-up was queued and the
payload is this run's to handle at its turn tail. The turn tail
(``has_pending_inbox_or_release``) drains the payload and pushes it back.
The agent is parked, so the run does not consume it: 2.0.8 goes around its
loop once with no input and fails the turn (F1's ``REPLY_END(ERROR)``),
2.0.9 on breaks out of the loop at once. Either way the run leaves the loop
with ``released`` false, and its ``finally`` calls
``abandon_inbox_consumer``. The user presses stop **once**, and its cancel
lands in that clean-up. ``abandon_inbox_consumer`` is awaited unshielded,
and the shielded ``_persist`` is created only after it returns (F8). So the
``CancelledError`` leaves the ``finally`` with no ``registry_del`` of the
consumer and no ``_persist``: the parked state (the ``ASKING`` call) is
never stored. Then the user confirms the card.

What the script shows, on agentscope's own ``InMemoryMessageBus``:

A. (counted) stop's cancel lands in ``abandon_inbox_consumer``'s acquire
   of the inbox lock (the clean-up's first bus call).
B. (counted) stop's cancel lands in ``abandon_inbox_consumer``'s
   ``registry_del`` of the consumer registration, after its drain found the
   payload and pushed it back.
C. (information, control) the same story with no stop: the user confirms
   the card.

For each, the script prints the REPLY_END events after the confirmation
(finished_reason, error message), whether ``GatedAction`` ran, the tool-call
state in the stored context, the consumer registration, and the inbox.

How the window is hit, and why Redis gives this order. A subclass of
``InMemoryMessageBus``: once ``REQUIRE_USER_CONFIRM`` has been published on
solo's events, the run's clean-up call (A: the second acquire of solo's
inbox lock after the card, the first being the turn tail's; B: the first
``registry_del`` of solo's inbox consumer after the card) returns only
after the stop request has been answered (at most 1 s). The stop is pressed
once that call is pending. On ``RedisMessageBus`` every call of the turn
tail and of the clean-up is a network round trip (``SET NX PX`` for the
acquire, an ``EVAL`` per drain, ``RPUSH`` per push back, ``HDEL``, an
``EVAL`` to release), and on 2.0.8 F1's error reply adds more
(``XADD``/``PUBLISH`` of ``REPLY_START``/``REPLY_END``). While the run
awaits one of them the loop serves other requests. A stop pressed when the
card shows is one of those: ``interrupt_session`` finds the session lock
held (it is released only after the ``finally``), publishes on the
interrupt channel, and the cancel dispatcher's ``task.cancel()`` lands in
whichever round trip is pending. The hook only makes the pending round trip
last as long as the stop request; it does not change what code runs or in
what order it awaits.

Result (2.0.8 and 2.0.11, exit 1 on each). In A and B the single stop's
cancel lands in the held clean-up call; the run makes no ``log_trim`` (no
``_persist``), and the session lock is released. Right after the stop the
consumer registration is left behind, the payload waits in the inbox with
no wake-up queued, and the stored context holds no tool call at all: the
parked reply was never stored. The confirmation is accepted (200), its
resume publishes ``REPLY_END(ERROR)`` "setup: The session could not be
prepared", and ``GatedAction`` never runs. The resume run's own clean-up
then hands the payload on, and a later reply ends ``completed`` (the
scripted model's next turn, "deployed", although nothing was deployed);
the payload reaches the stored context and no registration is left at the
end. In the control C the stored call is ``asking``, the confirmation runs
it once (``finished``) and the reply ends ``completed``. So the candidate's
consequence is real on both releases: the registration dangles only until
the next run, the payload is not lost, but the user's confirmed call is
dropped with an error reply.

With the reference fix (``--with-fix``) the stop ends the parked reply
(the stored call is closed as interrupted), so the later confirmation is
stale and the call rightly does not run.

Exit codes: 1 if, in A or B, the window was hit and the confirmed call never
runs although the stop did not end its reply (or runs although it did), or a reply after the confirmation ends ``ERROR``, or the consumer
registration dangles at the end, or the payload is in neither the stored
context nor the inbox; 0 if the window was hit and none of these; 2 if the
window was missed in both (the cancel did not land in the held call).

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f10_stop_in_cleanup_then_confirm.py
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import App, app_on, describe, hint, in_memory_peek, run_script, say, verdict  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ConfirmResult, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock  # noqa: E402
from fastapi import HTTPException  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402


class Hold:
    """One held bus call: it waits until ``answered`` is set, or 1 s, and
    notes whether a cancel landed in that wait."""

    def __init__(self) -> None:
        self.answered = asyncio.Event()
        self.held = asyncio.Event()
        self.cancel_landed = False
        self.answered_while_held = False

    async def wait(self) -> None:
        self.held.set()
        # No asyncio.wait_for: on Python 3.11 it can swallow a cancel.
        asyncio.get_running_loop().call_later(1.0, self.answered.set)
        try:
            await self.answered.wait()
        except asyncio.CancelledError:
            self.cancel_landed = True
            raise

    def answer(self) -> None:
        """The stop has been answered: release the call."""
        self.answered_while_held = self.held.is_set() and not self.answered.is_set()
        self.answered.set()

    def stop_met(self) -> bool:
        """The stop reached the run while this call was pending: its cancel
        landed in the call, or (where the clean-up is shielded, as with the
        reference fix) the stop was answered while the call was held."""
        return self.cancel_landed or self.answered_while_held


class CleanupHoldBus(InMemoryMessageBus):
    """agentscope's in-memory bus. While ``mode`` is set and once
    ``REQUIRE_USER_CONFIRM`` has been published on a session's events:
    ``"acquire"`` holds the second acquire of that session's inbox lock
    (the clean-up's, after the turn tail's), ``"registry_del"`` holds the
    first ``registry_del`` of its inbox consumer. It records the run's
    inbox, registry and event-log calls from the card on."""

    def __init__(self) -> None:
        super().__init__()
        self.mode: str | None = None
        self.reset()

    def reset(self) -> None:
        self.hold = Hold()
        self.calls: list[str] = []
        self.carded: str | None = None
        self._acquires = 0
        self._armed = True

    def _note(self, text: str) -> None:
        if self.carded is not None and self.mode is not None:
            self.calls.append(text)

    async def publish(self, key: str, payload: dict) -> None:
        if self.mode and payload.get("type") == "REQUIRE_USER_CONFIRM":
            self.carded = key.rsplit(":", 1)[-1]
        await super().publish(key, payload)

    async def _maybe_hold(self, call: str) -> None:
        if self.mode == call and self._armed:
            self._armed = False
            await self.hold.wait()

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        inbox_lock = self.carded is not None and key == MessageBusKeys.inbox_lock(self.carded)
        if inbox_lock:
            self._acquires += 1
            self._note(f"acquire inbox lock #{self._acquires}")
            if self._acquires == 2:
                await self._maybe_hold("acquire")
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield

    async def queue_drain(self, key: str, max_count: int = 100):
        drained = await super().queue_drain(key, max_count)
        if self.carded and key == MessageBusKeys.inbox(self.carded):
            self._note(f"queue_drain inbox -> {len(drained)}")
        return drained

    async def queue_push(self, key: str, *args, **kwargs):
        if self.carded and key == MessageBusKeys.inbox(self.carded):
            self._note("queue_push inbox")
        return await super().queue_push(key, *args, **kwargs)

    async def registry_del(self, namespace: str, field: str) -> None:
        if self.carded and namespace == MessageBusKeys.inbox_consumer(self.carded):
            self._note("registry_del inbox consumer")
            await self._maybe_hold("registry_del")
        await super().registry_del(namespace, field)

    async def log_trim(self, *args, **kwargs):
        self._note("log_trim (the run's _persist)")
        return await super().log_trim(*args, **kwargs)


@dataclass
class Outcome:
    stop: str
    window_hit: bool
    calls: list[str]
    after_stop: dict
    confirm: str
    ends_after_confirm: list[str]
    gated_ran: int
    stored_calls: list[str]
    end: dict
    payload: str

    @property
    def errors(self) -> list[str]:
        return [e for e in self.ends_after_confirm if "finished_reason=error" in e]

    @property
    def lost(self) -> bool:
        return not self.end["stored"] and not any(self.payload in p for p in self.end["inbox"])

    @property
    def stop_ended_the_reply(self) -> bool:
        """The stop closed the parked call before the confirmation (what
        the reference fix does): the card is stale, the call must not run."""
        calls = self.after_stop["calls"]
        return bool(calls) and all(c.endswith(":finished") for c in calls)

    def problems(self) -> list[str]:
        out = []
        if self.stop_ended_the_reply:
            if self.gated_ran:
                out.append("the call ran although the stop had ended its reply")
        elif not self.gated_ran:
            out.append("the confirmed GatedAction call never ran")
        if self.errors:
            out.append(f"the resume ended {self.errors}")
        if self.end["registered"] is not None:
            out.append("the inbox consumer registration dangles")
        if self.lost:
            out.append("the payload is lost")
        return out

    def report(self) -> None:
        say(f"   stop: {self.stop}; met the held clean-up call (its cancel landed there, or, with the fix, it was answered while the call was held): {self.window_hit}")
        say(f"   the run from the card on: {self.calls or 'nothing'}")
        a = self.after_stop
        say(f"   after the stop: registration {_reg(a['registered'])}; inbox: "
            f"{a['inbox'] or 'empty'}; wake-ups queued: {a['wakeups']}; "
            f"stored call state: {a['calls'] or 'no tool call stored'}; "
            f"session lock held: {a['locked']}")
        say(f"   user confirms: {self.confirm}")
        say(f"   REPLY_END after the confirmation: {self.ends_after_confirm or 'none'}")
        say(f"   GatedAction ran: {self.gated_ran} time(s)")
        e = self.end
        say(f"   at the end: stored call state: {e['calls'] or 'no tool call stored'}; "
            f"registration {_reg(e['registered'])}; inbox: {e['inbox'] or 'empty'}; "
            f"wake-ups queued: {e['wakeups']}; payload in the stored context: {e['stored']}")


def _reg(value: object) -> str:
    return "gone" if value is None else f"LEFT BEHIND ({value!r})"


async def look(app: App, agent: str, session: str, payload: str) -> dict:
    bus = app.bus
    calls = []
    for msg in await app.context(agent, session):
        for block in msg.get_content_blocks():
            if getattr(block, "type", None) == "tool_call":
                state = getattr(block, "state", None)
                calls.append(f"{block.name}:{getattr(state, 'value', state)}")
    return dict(
        registered=await bus.registry_get(
            MessageBusKeys.inbox_consumer(session),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
        ),
        inbox=[str(p.get("hint", p)) for p in in_memory_peek(bus, MessageBusKeys.inbox(session))],
        wakeups=len(in_memory_peek(bus, MessageBusKeys.wakeup_queue())),
        calls=calls,
        stored=payload in await app.context_texts(agent, session),
        locked=await bus.is_locked(MessageBusKeys.session_lock(session)),
    )


async def story(app: App, mode: str | None, number: int) -> Outcome:
    bus: CleanupHoldBus = app.bus
    bus.reset()
    bus.mode = mode
    agent = await app.add_agent("solo")
    session = await app.add_session(agent, "solo")
    ui = await app.tap(session)
    app.script("solo").add(CallTool("GatedAction", {"note": f"deploy {number}"}), Text("deployed"))
    payload = f"teammate: staging {number} is ready"
    delivered = asyncio.Event()
    stop: list[str] = []

    async def team_member() -> None:
        await ui.wait_for("MODEL_CALL_START")
        await app.deliver(agent, session, hint(payload, "team member"))
        delivered.set()

    async def model_answers_after(_script: str) -> None:
        await delivered.wait()

    async def user_stops() -> None:
        await bus.hold.held.wait()
        status = await app.press_stop(agent, session)
        stop.append(f"HTTP {status}")
        bus.hold.answer()

    app.book.while_answering = model_answers_after
    member = asyncio.create_task(team_member())
    stopper = asyncio.create_task(user_stops()) if mode else None
    status = await app.post_chat(agent, session, "please deploy")
    await member
    if stopper is not None:
        done, _ = await asyncio.wait([stopper], timeout=5.0)
        if not done:
            stopper.cancel()
            stop.append("not pressed (the clean-up call was never held)")
    await app.settle()
    app.book.while_answering = None
    bus.mode = None
    after_stop = await look(app, agent, session, payload)

    ask = await ui.wait_for("REQUIRE_USER_CONFIRM")
    seen = len(ui.events)
    answer = UserConfirmResultEvent(
        reply_id=ask["reply_id"],
        confirm_results=[
            ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call))
            for call in ask["tool_calls"]
        ],
    )
    try:
        confirm = f"HTTP {await app.post_chat_event(agent, session, answer)}"
    except HTTPException as refused:
        confirm = f"HTTP {refused.status_code} ({refused.detail})"
    await asyncio.sleep(0.2)
    await app.settle()
    return Outcome(
        stop=stop[0] if stop else "not pressed",
        window_hit=bus.hold.stop_met(),
        calls=list(bus.calls),
        after_stop=after_stop,
        confirm=f"post chat {status}; confirmation {confirm}",
        ends_after_confirm=[describe(e) for e in ui.events[seen:] if e.get("type") == "REPLY_END"],
        gated_ran=len([e for e in app.desk.runs("GatedAction") if e.session_id == session]),
        stored_calls=after_stop["calls"],
        end=await look(app, agent, session, payload),
        payload=payload,
    )


async def main() -> int:
    counted: list[tuple[str, Outcome]] = []
    async with app_on(CleanupHoldBus()) as app:
        say("A. one stop; its cancel lands in abandon_inbox_consumer's inbox-lock acquire; then confirm")
        a = await story(app, "acquire", 1)
        a.report()
        counted.append(("A", a))

        say("B. one stop; its cancel lands in abandon_inbox_consumer's registry_del; then confirm")
        b = await story(app, "registry_del", 2)
        b.report()
        counted.append(("B", b))

        say("C. control, no stop: the same story, then confirm")
        c = await story(app, None, 3)
        c.report()
        say(f"   problems in the control (not counted): {c.problems() or 'none'}")

    return verdict(
        counted,
        missed="the cancel did not land in the clean-up",
        fine="the stop met the clean-up, and either it ended the parked reply or the "
             "confirmation still ran the call",
    )


if __name__ == "__main__":
    run_script(main)

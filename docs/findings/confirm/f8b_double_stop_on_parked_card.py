"""F8b (F8 on a parked card; I10, a reply that never ends, met by I14's
search): stop, stop while a run parked on a confirmation card is in its
turn tail.

The story, from the harness (2.0.8 and 2.0.11; I14's search met it on the
way in stories of 12 and 14 steps, cut down to 3 that still fail:
``docs/findings/counterexamples/I10-8be5ca78``): the user messages ``solo``, whose model calls
``GatedAction``; the call parks (``ASKING``) and ``REQUIRE_USER_CONFIRM``
is published. The run goes on to its turn tail, with nothing in the
inbox. The user presses stop twice (a double click on the card's stop).
Both presses find the session lock held and publish on the interrupt
channel; the cancel dispatcher cancels the run task twice. Stop 1's cancel
lands in the turn tail's acquire of the inbox lock, so ``released`` stays
false and the run's ``finally`` calls ``abandon_inbox_consumer``
(unshielded); stop 2's cancel lands there. That is F8's mechanism: the
``CancelledError`` leaves the ``finally`` before the shielded ``_persist``
is created. Here the run is parked, so nothing ends its reply: F8 lost a
drained payload; this loses the reply itself.

What the script shows, on agentscope's own ``InMemoryMessageBus`` (F8's
``DoubleStopBus``, with its first hold armed by ``REQUIRE_USER_CONFIRM``
instead of ``REPLY_END``):

A. (counted) stop 1 lands in the turn tail's inbox-lock acquire, stop 2 in
   ``abandon_inbox_consumer``'s acquire of the inbox lock.
B. (counted) the same, stop 2 in ``abandon_inbox_consumer``'s
   ``registry_del``.
C. (information) no hook: stop, stop back to back the moment the UI
   receives ``REQUIRE_USER_CONFIRM``, ten times, each in an app of its own
   (a cancel that lands inside a storage write can leave sqlite locked,
   "database is locked", for the next try).

A and B force F8's rarer path. Left to the natural race (C), the cancels
mostly take its common path (``trace_cancels.py``): stop 1 lands at
``await asyncio.shield(persist_task)``, stop 2 at the ``except`` branch's
unshielded ``await persist_task``, which cuts ``_persist`` short; when the
cut falls before the state's ``UPDATE`` the reply is lost as in A and B,
when it falls in the final ``COMMIT`` the parked state is stored and both
stops are lost (F3). No registration is left on that path.

For each it prints the reply's events after the card, whether a
``REPLY_END`` ever came, the session's stored status and tool calls, the
consumer registration, and whether the run made its ``_persist``
(``log_trim``). A reply with no ``REPLY_END`` whose parked state was stored
still waits for the user: its stops were lost (F3), and C counts it apart.

How the window is hit, and why Redis gives this order: as in F8. Once the
card is published, the turn tail's acquire of the inbox lock returns only
after stop 1 has been answered, and the run's next clean-up call returns
only after stop 2 has been answered (each at most 1 s). On
``RedisMessageBus`` each is a round trip (``SET NX PX``, ``HDEL``) and the
session lock is held until the ``finally`` ends, so a second stop served
meanwhile publishes, and its cancel lands in the pending round trip. The
hook only makes a pending call last as long as a stop request.

Exit codes: 1 if, in A or B, both cancels landed and the reply never
ended with nothing parked stored, or the consumer registration is left
behind; 0 if both landed and neither happened (the reply ended, or its
parked state was stored); 2 if the window was missed in
both.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f8b_double_stop_on_parked_card.py

``--with-fix`` applies the harness's reference fixes first (exit 0 is
expected).
"""
from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import App, app_on, describe, run_script, say, verdict  # noqa: E402
from agentscope.app.message_bus import MessageBusKeys  # noqa: E402
from f8_double_stop_in_turn_tail import DoubleStopBus, natural_tries  # noqa: E402
from fakes.model import CallTool, Text  # noqa: E402


class ParkedDoubleStopBus(DoubleStopBus):
    """F8's bus, its first hold armed once a confirmation card is
    published (a parked run publishes no ``REPLY_END`` before its turn
    tail)."""

    ARMED_BY = "REQUIRE_USER_CONFIRM"


@dataclass
class Outcome:
    presses: list[str]
    first_landed: bool
    second_landed: bool
    calls: list[str]
    after_card: list[str]
    reply_ends: list[str]
    status: str
    stored_calls: list[str]
    registered: object
    locked: bool

    @property
    def window_hit(self) -> bool:
        return self.first_landed and self.second_landed

    @property
    def still_parked(self) -> bool:
        """The parked state was stored: the reply has not ended because it
        still waits for the user (the stops were lost, F3), not this."""
        return self.status != "idle"

    @property
    def lost_reply(self) -> bool:
        """No ``REPLY_END``, and nothing parked was stored: the reply can
        never end."""
        return not self.reply_ends and not self.still_parked

    def problems(self) -> list[str]:
        found = []
        if self.lost_reply:
            found.append(f"the reply never ended (session stored {self.status}, "
                         f"stored calls {self.stored_calls or 'none'})")
        if self.registered is not None:
            found.append("the inbox consumer registration is left behind")
        return found

    def report(self) -> None:
        say(f"   presses: {'; '.join(self.presses)}")
        say(f"   stop 1's cancel landed in the turn tail: {self.first_landed}; stop 2 met "
            f"the held clean-up call: {self.second_landed}")
        say(f"   the run after the first cancel: {self.calls or 'nothing'}")
        say(f"   events after the card: {self.after_card or 'none'}")
        say(f"   REPLY_END: {self.reply_ends or 'NEVER'}; session stored {self.status}, "
            f"tool calls {self.stored_calls or 'none'}")
        say(f"   inbox consumer registration: "
            f"{'gone' if self.registered is None else f'LEFT BEHIND ({self.registered!r})'}; "
            f"session lock held: {self.locked}")


async def stored_calls(app: App, agent: str, session: str) -> list[str]:
    calls = []
    for msg in await app.context(agent, session):
        for block in msg.get_content_blocks("tool_call"):
            state = getattr(block, "state", None)
            calls.append(f"{block.name}:{getattr(state, 'value', state)}")
    return calls


async def double_stop(app: App, cleanup_call: str | None, number: int) -> Outcome:
    """``solo`` parks on ``GatedAction``; stop, stop (held as
    ``cleanup_call`` says, or back to back when the card shows)."""
    bus: ParkedDoubleStopBus = app.bus
    bus.reset()
    bus.cleanup_call = cleanup_call
    agent = await app.add_agent("solo")
    script = f"solo-{number}"  # its own model script: a reply cut short leaves turns unplayed
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    app.script(script).add(CallTool("GatedAction", {"note": f"deploy {number}"}), Text("deployed"))
    presses: list[str] = []

    async def stop(label: str) -> None:
        before = bus.interrupt_publishes
        status = await app.press_stop(agent, session)
        how = ("published on the interrupt channel" if bus.interrupt_publishes > before
               else "lock free: resume trigger")
        presses.append(f"{label} HTTP {status} ({how})")

    async def user() -> None:
        if cleanup_call is None:
            await ui.wait_for("REQUIRE_USER_CONFIRM")
            await stop("stop 1")
            await stop("stop 2")
            return
        await bus.first.held.wait()
        await stop("stop 1")
        bus.first.answered.set()
        run = app.registry.get(session)
        held = asyncio.create_task(bus.second.held.wait())
        await asyncio.wait([held, run], timeout=2.0, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        await stop("stop 2")
        bus.second.answer()

    pressing = asyncio.create_task(user())
    await app.post_chat(agent, session, "please deploy")
    done, _ = await asyncio.wait([pressing], timeout=5.0)
    if not done:
        pressing.cancel()
        presses.append("no stop pressed (the card never showed, or no call was held)")
    # At most 3 s: these runs end within milliseconds, and with --with-fix
    # the inbox sweeper counts as pending dispatcher work for its 30 s.
    await app.settle(timeout=3.0)
    bus.cleanup_call = None
    card = next((n for n, e in enumerate(ui.events) if e.get("type") == "REQUIRE_USER_CONFIRM"), 0)
    return Outcome(
        presses=presses,
        first_landed=bus.first.cancel_landed,
        second_landed=bus.second.stop_met(),
        calls=list(bus.calls),
        after_card=[describe(e) for e in ui.events[card + 1:]],
        reply_ends=[describe(e) for e in ui.reply_ends()],
        status=await app.parked_status(agent, session),
        stored_calls=await stored_calls(app, agent, session),
        registered=await bus.registry_get(
            MessageBusKeys.inbox_consumer(session), MessageBusKeys.INBOX_CONSUMER_FIELD,
        ),
        locked=await bus.is_locked(MessageBusKeys.session_lock(session)),
    )


async def main() -> int:
    counted: list[tuple[str, Outcome]] = []
    held = (
        ("A", "acquire", "stop 1 lands in the turn tail, stop 2 in abandon_inbox_consumer's "
                         "inbox-lock acquire"),
        ("B", "registry_del", "the same, stop 2 lands in abandon_inbox_consumer's registry_del"),
    )
    async with app_on(ParkedDoubleStopBus()) as app:
        for number, (name, cleanup_call, what) in enumerate(held, 1):
            say(f"{name}. {what}")
            outcome = await double_stop(app, cleanup_call, number)
            outcome.report()
            counted.append((name, outcome))

    say("C. no hook: stop, stop back to back the moment the card shows, 10 times")
    natural = await natural_tries(ParkedDoubleStopBus, double_stop)
    say(f"   replies that never end (stored idle, no REPLY_END): "
        f"{sum(o.lost_reply for o in natural)} of 10; stops lost, the reply still parked (F3): "
        f"{sum(not o.reply_ends and o.still_parked for o in natural)}; registrations left: "
        f"{sum(o.registered is not None for o in natural)}")

    return verdict(
        counted,
        missed="the second cancel did not land in the clean-up",
        fine="both cancels met the parked run, and neither the reply nor a registration "
             "was lost (the reply ended, or its parked state was stored and it still waits)",
    )


if __name__ == "__main__":
    run_script(main)

"""F3: a stop pressed while a parked run finishes its turn is lost.

What it shows: the user messages a session; its model calls
``GatedAction`` and the confirmation card shows (``REQUIRE_USER_CONFIRM``).
The user presses stop. The run has parked but still holds the session
lock while it finishes its turn, so ``ChatService.interrupt`` publishes on
the interrupt channel, answers 202, and the cancel dispatcher cancels the
run task (the script reports that it did). That cancel lands after the
agent's generator has finished, so none of the agent's interrupt handling
runs: no ``REPLY_END(INTERRUPTED)`` is published and the session stays
parked on the call. Stop did nothing. (A stop pressed once the lock is
free goes the other way, a ``resume`` trigger carrying the interrupt, and
works: the rare lucky draws of C.)

Two real windows, each hit by construction (A, B); the race left alone
(C); and the harness's own counterexample story (D). B, C and D run with
the hook of A switched off, so every bus call goes straight to
``InMemoryMessageBus``.

A. the turn tail. The stop reaches the server while the run is at its
   turn tail (``has_pending_inbox_or_release``). Hit with a subclass of
   ``InMemoryMessageBus`` whose acquire of that session's inbox lock, once
   the card is published, returns only after the stop request has been
   answered (at most 1 s): on Redis that acquire is a network round trip,
   during which the loop serves the stop request and the cancel
   dispatcher's subscription, exactly as here. Before 2.0.7 there is no
   such check: the run's turn ends when it lets go of the session lock
   after storing the parked state, and the hook holds that release (on
   Redis an ``EVAL`` round trip) instead.
B. auto-naming (2.0.8 on; 2.0.7 has none). A session created from the UI
   without a name has ``naming.auto=True`` (``_router/_session.py``); after
   its first turn has parked, ``_auto_name_session`` asks the session's
   model for a title, still under the session lock. The naming call here
   takes 1 s, as a real model call does; the user presses stop 0.3 s after
   the card shows. Plain ``InMemoryMessageBus``, no hook: the window is a
   whole model call wide.
C. no help at all: plain ``InMemoryMessageBus``, the stop request sent the
   moment the UI receives the card, ten times; the natural order of awaits
   (aiosqlite's thread hand-backs while the run persists) decides. Reported
   for information, not used for the exit code.
D. the story of the harness's I9 counterexamples (stop pressed while the
   model is still streaming; the model goes on for 0.5 s). On the real
   bus the interrupt reaches the cancel dispatcher at once and lands in
   the model call: ``REPLY_END(INTERRUPTED)``, as it should. That story
   needs the harness's fake holding the published interrupt back while the
   run does many more operations, which no deployment does; so the
   counterexamples' story is not confirmed, the finding is (A, B, C).
   Reported for information, not used for the exit code.

Releases: every release from 2.0.7 to 2.0.11 (exit 1 on each; B is
skipped on 2.0.7), and 2.0.6 (A through the session lock's release; B
skipped: no auto-naming before 2.0.8).

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f3_stop_lost.py
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, run_script, say  # noqa: E402
from agentscope.app import storage as app_storage  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import CallTool  # noqa: E402


#: 2.0.7 on: a parked run's turn tail checks its inbox under the inbox
#: lock. Before, the run's turn ends with the release of its session lock.
TURN_TAIL_CHECK = hasattr(MessageBusKeys, "inbox_lock")


class SlowTurnTailBus(InMemoryMessageBus):
    """agentscope's in-memory bus, except that while ``slow_turn_tail`` is
    on and once a confirmation card has been published, acquiring that
    session's inbox lock (the turn tail; before 2.0.7, releasing its session
    lock) waits until ``stop_answered`` is set, or 1 s. With
    ``slow_turn_tail`` off every call goes straight to
    ``InMemoryMessageBus``."""

    def __init__(self) -> None:
        super().__init__()
        self.slow_turn_tail = False
        self.stop_answered = asyncio.Event()
        self._carded: set[str] = set()

    async def publish(self, key: str, payload: dict) -> None:
        if self.slow_turn_tail and payload.get("type") == "REQUIRE_USER_CONFIRM":
            self._carded.add(key)
        await super().publish(key, payload)

    async def _until_stop_answered(self, session: str) -> None:
        """Once the session's card is out: wait for the stop's answer."""
        if MessageBusKeys.session_events(session) in self._carded:
            self._carded.discard(MessageBusKeys.session_events(session))
            # No asyncio.wait_for: on Python 3.11 it can swallow a cancel
            # that arrives as the awaited event is set.
            asyncio.get_running_loop().call_later(1.0, self.stop_answered.set)
            await self.stop_answered.wait()

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        session = key.rsplit(":", 1)[-1]
        if TURN_TAIL_CHECK and key == MessageBusKeys.inbox_lock(session):
            await self._until_stop_answered(session)
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield
            if not TURN_TAIL_CHECK and key == MessageBusKeys.session_lock(session):
                # Before 2.0.7 the turn ends by letting go of the session:
                # on Redis that release is a round trip (EVAL) too.
                await self._until_stop_answered(session)


@dataclass
class Outcome:
    stop_status: int
    after_stop: list[str]
    """Events the UI received after the stop was pressed."""
    parked: str
    naming_pending: bool
    """``naming.auto`` still set: the session was never named."""
    run_cancelled: bool
    """The cancel dispatcher did cancel the run task."""

    @property
    def lost(self) -> bool:
        return (
            not any("finished_reason=interrupted" in e for e in self.after_stop)
            and self.parked != "idle"
        )

    def __str__(self) -> str:
        return (
            f"stop: HTTP {self.stop_status}; events after it: "
            f"{self.after_stop or 'none'}; session: {self.parked}; "
            f"run task cancelled: {self.run_cancelled}"
        )


async def press_stop_on(
    app: App,
    event: str,
    *,
    reaction: float = 0.0,
    naming_secs: float | None = None,
) -> Outcome:
    """One story: the user messages a session whose model calls
    ``GatedAction``, and presses stop ``reaction`` s after the UI receives
    ``event``. With ``naming_secs`` the session was created from the UI
    (``naming.auto``) and the naming model call takes that long. A model
    answer still streaming when stop is pressed goes on until the stop
    has been answered."""
    agent = await app.add_agent("leader")
    config = {}
    if naming_secs is not None:
        from agentscope.app.storage import SessionNaming

        config["naming"] = SessionNaming(auto=True)
    session = await app.add_session(agent, "leader", **config)
    ui = await app.tap(session)
    app.script("leader").add(CallTool("GatedAction", {"note": "deploy"}))

    async def model_latency(_script: str) -> None:
        if "REQUIRE_USER_CONFIRM" in ui.types():  # the naming call
            await asyncio.sleep(naming_secs or 0.0)
        elif event == "MODEL_CALL_START":  # still streaming when stop comes
            await asyncio.sleep(0.5)

    app.book.while_answering = model_latency
    pressed_at: list[int] = []
    status: list[int] = []

    async def user() -> None:
        await ui.wait_for(event)
        await asyncio.sleep(reaction)
        pressed_at.append(len(ui.events))
        status.append(await app.press_stop(agent, session))
        app.bus.stop_answered.set()

    pressing = asyncio.create_task(user())
    await app.post_chat(agent, session, "please deploy")
    run = app.registry.get(session)
    await pressing
    await app.settle()
    record = await app.storage.get_session(app.user_id, agent, session)
    naming = getattr(record.config, "naming", None)
    return Outcome(
        stop_status=status[0],
        after_stop=[describe(e) for e in ui.events[pressed_at[0]:]],
        parked=await app.parked_status(agent, session),
        naming_pending=bool(naming and naming.auto),
        run_cancelled=run.cancelled(),
    )


async def main() -> int:
    confirmed = []
    bus = SlowTurnTailBus()
    async with app_on(bus) as app:
        say("A. stop reaches the server while the parked run is at its turn tail")
        bus.slow_turn_tail = True
        outcome = await press_stop_on(app, "REQUIRE_USER_CONFIRM")
        bus.slow_turn_tail = False
        say(f"   {outcome}")
        if outcome.lost:
            confirmed.append("A")

        say("B. stop pressed 0.3 s after the card, during the 1 s auto-naming call")
        if not hasattr(app_storage, "SessionNaming"):
            say(f"   skipped: {VERSION} has no auto-naming")
        else:
            outcome = await press_stop_on(
                app, "REQUIRE_USER_CONFIRM", reaction=0.3, naming_secs=1.0,
            )
            say(f"   {outcome}; session still unnamed: {outcome.naming_pending}")
            if outcome.lost:
                confirmed.append("B")

        say("C. no help: stop sent the moment the UI receives the card, 10 times")
        outcomes = [await press_stop_on(app, "REQUIRE_USER_CONFIRM") for _ in range(10)]
        lost = sum(o.lost for o in outcomes)
        say(
            f"   stops lost: {lost} of 10"
            + (" (the others ended INTERRUPTED, as they should)" if lost < 10 else ""),
        )

        say("D. the harness's counterexample story: stop while the model streams")
        outcome = await press_stop_on(app, "MODEL_CALL_START")
        say(f"   {outcome}")
        say(
            "   honoured, as it should be" if not outcome.lost
            else "   lost as well",
        )

    if confirmed:
        say(f"CONFIRMED on agentscope {VERSION}: the stop was lost in {', '.join(confirmed)}")
        return 1
    say(f"not reproduced on agentscope {VERSION}")
    return 0


if __name__ == "__main__":
    run_script(main)

"""F8: a second stop that lands in a run's cleanup loses the drained payload.

The story, from the harness (2.0.8, with interrupts):
payload_arrives(channel→solo), dispatcher_processes_queue,
run_reaches_turn_tail(solo), user_interrupts(solo),
user_sends_message(solo) (answered 409: a run is in flight),
user_interrupts(solo), user_interrupts(solo). The user double-clicks stop
(and a third time) while the wake-run is in its turn tail.

F7 showed that one stop whose cancel lands in the turn tail loses
nothing: ``_run_impl``'s ``finally`` calls ``abandon_inbox_consumer``,
which takes the inbox lock, drains, and deletes the consumer registration,
and then the shielded ``_persist`` stores the agent state, which holds the
drained payload. Only ``_persist`` is shielded. ``abandon_inbox_consumer``
is awaited unshielded inside the ``finally``. Each press of stop while the
session lock is held publishes on the interrupt channel again, and the
cancel dispatcher calls ``task.cancel()`` again on the same run task. A
second cancel that lands while the ``finally`` awaits
``abandon_inbox_consumer`` raises ``CancelledError`` out of the
``finally``. The rest of ``abandon_inbox_consumer`` is skipped, and so is
``_persist``, which is never created. The session lock is still released,
by the ``async with`` around the run.

What the script shows, on agentscope's own ``InMemoryMessageBus``:

A. (the harness's story, the exit code) A channel payload wakes idle
   ``solo``. The wake-run's ``InboxMiddleware`` drains it into the agent's
   context, and the reply ends ``completed``. Stop 1's cancel lands in the
   turn tail's acquire of the inbox lock, as in F7. The run's ``finally``
   calls ``abandon_inbox_consumer``, and its acquire of the inbox lock is
   where stop 2's cancel lands. Between the two stops the user's message
   is refused with 409. Stop 3 follows at once. Afterwards the script
   prints whether the consumer registration is left, whether the payload
   is in the stored context, and what is queued. It then delivers a later
   payload and prints whether it wakes the session.
A2. (counted as well) A without stop 3: a double click only. With stop 3
   the lock is free by then, so stop 3 queues a ``resume`` trigger whose run
   registers as consumer and releases it again; A2 shows what the
   second cancel leaves when nothing else comes.
B. (counted as well) The same as A, but stop 2's cancel lands in
   ``abandon_inbox_consumer``'s ``registry_del`` of the registration,
   after the lock is taken and the empty inbox drained.
C. (information) No hook. Stop is pressed twice back to back the moment
   the UI receives ``REPLY_END``, ten times. This is the natural race
   on the in-memory bus.

How the window is hit, and why Redis gives this order. This uses a
subclass of ``InMemoryMessageBus``. Once ``REPLY_END`` has been published
on solo's events, (1) the turn tail's acquire of solo's inbox lock returns
only after stop 1 has been answered (at most 1 s), as in F3 and F7. (2)
After that first cancel has landed, the next bus call of the run's
cleanup returns only after stop 2 has been answered (at most 1 s). That
call is the inbox-lock acquire in A and the consumer ``registry_del`` in
B. On ``RedisMessageBus`` each of these calls is a network round trip:
``SET NX PX`` for the acquire, then an ``EVAL`` for each drain, ``HDEL``,
and an ``EVAL`` for the release. While the run awaits one of them, the
event loop serves other requests. Stop 2 is one of those:
``interrupt_session`` reads the session, finds the session lock held
(``EXISTS``, which it still is: the lock is released only after the
``finally``), and publishes. The cancel dispatcher's subscription then
delivers it and calls ``task.cancel()``. The cancel lands in whichever
round trip of the cleanup is pending. The cleanup is four round trips
long after the first cancel. The hook makes it as long as the second
request takes. It does not change what code runs or in what order it
awaits.

Result (2.0.8 and 2.0.11, exit 1 on each). In A, A2 and B stop 2's
cancel lands in the held cleanup call, and the first run never reaches
``_persist``: it makes no ``log_trim``. The drained payload is in neither
the stored context nor the inbox, and no wake-up is queued, so it is lost.
In A2 the consumer registration is also left behind with no run: a later
team member's delivery is queued, wakes nothing, and waits for the 600 s
lease (the lease is not simulated). In A and B, stop 3 finds the session
lock free and queues a ``resume`` trigger. That run registers as consumer
and releases the registration again, so none dangles afterwards. The
payload stays lost, because that run loads the stored state.

C (no hook) takes another path than A, A2 and B, as ``trace_cancels.py``
shows by recording where each cancel lands: by the time stop 1 is served,
the turn-tail check has found the inbox empty and released the
registration (``released`` is true, so ``abandon_inbox_consumer`` never
runs), and stop 1 lands at ``await asyncio.shield(persist_task)``. The
``except`` branch then awaits ``persist_task`` unshielded; stop 2 lands
there and is passed on into ``_persist``, whose storage write it cuts
short. No registration is left on that path. Loss rates (2.0.8): 7 of 20
tries on one app and 0 of 20 on fresh apps on the in-memory bus, 9 of 20 on
a real redis-server; this scenario gives each try a fresh app (a cancelled
write can leave sqlite locked for the next try), so it loses few.

Releases: ``app/_bus_ops.py`` is byte-identical from 2.0.8 to 2.0.11. In
each release ``_run_impl``'s ``finally`` awaits ``abandon_inbox_consumer``
unshielded before it starts the shielded ``_persist``. 2.0.11 moves
``_persist``'s writes under a checkpoint lock, but the order is the same.

Exit codes: 1 if, in A, A2 or B, the cancel landed in the held cleanup call
and the registration is left behind or the drained payload is in neither
the stored context nor the inbox; 0 if the window was hit and nothing was
lost; 2 if the window was missed in both (the second cancel did not land
in the held cleanup call).

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f8_double_stop_in_turn_tail.py
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import App, app_on, describe, hint, in_memory_peek, run_script, say, verdict  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import Text  # noqa: E402


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
        # No asyncio.wait_for: on Python 3.11 it can swallow a cancel that
        # arrives as the awaited event is set.
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


class DoubleStopBus(InMemoryMessageBus):
    """agentscope's in-memory bus. While ``cleanup_call`` is set and once
    an :attr:`ARMED_BY` event (``REPLY_END``) has been published on a
    session's events:

    - ``first``: the next acquire of that session's inbox lock (the turn
      tail) waits for stop 1's answer;
    - ``second``: once a cancel has landed in ``first``, the run's next
      cleanup call (``cleanup_call``: ``"acquire"`` of the inbox lock, or
      ``"registry_del"`` of the inbox consumer) waits for stop 2's answer.

    It records the run's inbox, registry and event-log calls from the
    first cancel on, and counts publishes on the interrupt channel. With
    ``cleanup_call`` ``None`` every call goes straight to
    ``InMemoryMessageBus``."""

    #: The event after which the turn tail's inbox-lock acquire is held.
    ARMED_BY = "REPLY_END"

    def __init__(self) -> None:
        super().__init__()
        self.cleanup_call: str | None = None
        self.interrupt_publishes = 0
        self.reset()

    def reset(self) -> None:
        self.first = Hold()
        self.second = Hold()
        self.calls: list[str] = []
        self._armed: set[str] = set()
        self._second_armed = False

    def _note(self, text: str) -> None:
        if self.first.cancel_landed:
            self.calls.append(text)

    async def publish(self, key: str, payload: dict) -> None:
        if key == MessageBusKeys.session_interrupt_channel():
            self.interrupt_publishes += 1
        if self.cleanup_call and payload.get("type") == self.ARMED_BY:
            self._armed.add(key.rsplit(":", 1)[-1])
        await super().publish(key, payload)

    async def _maybe_hold_second(self, call: str) -> None:
        if (
            self.cleanup_call == call
            and self.first.cancel_landed
            and not self._second_armed
        ):
            self._second_armed = True
            await self.second.wait()

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        session = key.rsplit(":", 1)[-1]
        inbox_lock = key == MessageBusKeys.inbox_lock(session)
        if inbox_lock:
            self._note("acquire inbox lock")
            if session in self._armed:
                self._armed.discard(session)
                await self.first.wait()
            else:
                await self._maybe_hold_second("acquire")
        try:
            async with super().acquire_lock(key, ttl_secs=ttl_secs):
                if inbox_lock:
                    self._note("inbox lock taken")
                yield
        finally:
            if inbox_lock:
                self._note("release inbox lock")

    async def queue_drain(self, key: str, max_count: int = 100):
        drained = await super().queue_drain(key, max_count)
        if key.startswith(MessageBusKeys.inbox("")):
            self._note(f"queue_drain inbox -> {len(drained)}")
        return drained

    async def registry_del(self, namespace: str, field: str) -> None:
        if namespace.startswith(MessageBusKeys.inbox_consumer("")):
            self._note("registry_del inbox consumer")
            await self._maybe_hold_second("registry_del")
            self._note("registry_del done")
        await super().registry_del(namespace, field)

    async def log_trim(self, *args, **kwargs):
        self._note("log_trim (the run's _persist)")
        return await super().log_trim(*args, **kwargs)


@dataclass
class Outcome:
    presses: list[str]
    """Each press (stop or message): its HTTP status and what it did."""
    first_landed: bool
    second_landed: bool
    calls: list[str]
    """The run's inbox, registry and event-log calls after the first cancel."""
    after_stop: list[str]
    registered: object
    stored: dict[str, bool]
    inbox: list[str]
    wakeups: int
    session_locked: bool
    run_cancelled: bool
    extra: dict = field(default_factory=dict)

    @property
    def window_hit(self) -> bool:
        return self.first_landed and self.second_landed

    @property
    def dangling(self) -> bool:
        return self.registered is not None

    def lost(self) -> list[str]:
        return [
            text for text, stored in self.stored.items()
            if not stored and not any(text in queued for queued in self.inbox)
        ]

    def problems(self) -> list[str]:
        found = []
        if self.dangling:
            found.append("the inbox consumer registration is left behind")
        if self.lost():
            found.append(f"payload lost: {self.lost()}")
        return found

    def report(self) -> None:
        say(f"   presses: {'; '.join(self.presses)}")
        say(f"   stop 1's cancel landed in the turn tail: {self.first_landed}; "
            f"stop 2 met the held cleanup call (its cancel landed there, or, with the fix, it was answered while the call was held): {self.second_landed}; "
            f"run task cancelled: {self.run_cancelled}")
        say(f"   the run after the first cancel: {self.calls or 'nothing'}")
        say(f"   events after stop 1: {self.after_stop or 'none'}")
        say(f"   inbox consumer registration: "
            f"{'LEFT BEHIND (' + repr(self.registered) + ')' if self.dangling else 'gone'}; "
            f"session lock held: {self.session_locked}")
        for text, stored in self.stored.items():
            say(f"   {text!r} in the stored context: {stored}")
        say(f"   still queued in the inbox: {self.inbox or 'nothing'}; "
            f"wake-ups queued: {self.wakeups}")


async def look(app: App, agent: str, session: str, texts: list[str]) -> dict:
    bus = app.bus
    stored_text = await app.context_texts(agent, session)
    return dict(
        registered=await bus.registry_get(
            MessageBusKeys.inbox_consumer(session),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
        ),
        stored={text: text in stored_text for text in texts},
        inbox=[str(p.get("hint", p)) for p in in_memory_peek(bus, MessageBusKeys.inbox(session))],
        wakeups=len(in_memory_peek(bus, MessageBusKeys.wakeup_queue())),
        session_locked=await bus.is_locked(MessageBusKeys.session_lock(session)),
    )


async def double_stop(
    app: App,
    cleanup_call: str | None,
    number: int,
    *,
    third_stop: bool = True,
) -> Outcome:
    """A channel wakes idle solo; its wake-run drains the payload and
    answers. With ``cleanup_call``: stop 1 once the turn tail is held,
    a message (409 expected), stop 2 once the cleanup call is held, and
    stop 3 at once (unless ``third_stop`` is false). Without: stop, stop,
    back to back, the moment the UI receives ``REPLY_END``."""
    bus: DoubleStopBus = app.bus
    bus.reset()
    bus.cleanup_call = cleanup_call
    agent = await app.add_agent("solo")
    session = await app.add_session(agent, "solo")
    ui = await app.tap(session)
    app.script("solo").add(Text("noted"))
    payload = f"channel: build {number} on main is red"
    presses: list[str] = []
    pressed_at: list[int] = []

    async def stop(label: str) -> None:
        before = bus.interrupt_publishes
        status = await app.press_stop(agent, session)
        how = (
            "published on the interrupt channel" if bus.interrupt_publishes > before
            else "lock free: resume trigger"
        )
        presses.append(f"{label} HTTP {status} ({how})")

    async def user() -> None:
        if cleanup_call is None:
            await ui.wait_for("REPLY_END")
            pressed_at.append(len(ui.events))
            await stop("stop 1")
            await stop("stop 2")
            return
        await bus.first.held.wait()
        pressed_at.append(len(ui.events))
        await stop("stop 1")
        bus.first.answered.set()
        # Wait for the cleanup call to be held, or the run to end.
        run = app.registry.get(session)
        held = asyncio.create_task(bus.second.held.wait())
        await asyncio.wait([held, run], timeout=2.0, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        status = await app.post_chat(agent, session, "why is it red?")
        presses.append(f"message HTTP {status}")
        await stop("stop 2")
        bus.second.answer()
        if third_stop:
            await stop("stop 3")

    pressing = asyncio.create_task(user())
    await app.deliver(agent, session, hint(payload, "channel"))
    await asyncio.sleep(0)
    while app.registry.get(session) is None and not pressing.done():
        await asyncio.sleep(0.01)
    run = app.registry.get(session)
    await pressing
    await app.settle()
    bus.cleanup_call = None
    outcome = Outcome(
        presses=presses,
        first_landed=bus.first.cancel_landed,
        second_landed=bus.second.stop_met(),
        calls=list(bus.calls),
        after_stop=[describe(e) for e in ui.events[pressed_at[0]:]],
        run_cancelled=bool(run is not None and run.done() and run.cancelled()),
        **await look(app, agent, session, [payload]),
    )
    outcome.extra.update(agent=agent, session=session, ui=ui)
    return outcome


async def later_delivery(app: App, outcome: Outcome) -> None:
    agent, session, ui = (outcome.extra[k] for k in ("agent", "session", "ui"))
    ends_before = len(ui.reply_ends())
    later = "teammate: please look at it"
    await app.deliver(agent, session, hint(later, "team member"))
    await asyncio.sleep(0.3)
    await app.settle()
    seen = await look(app, agent, session, [*outcome.stored, later])
    woke = len(ui.reply_ends()) > ends_before
    say(f"   then a team member delivers {later!r}: the session "
        f"{'woke' if woke else 'did NOT wake'}; registration "
        f"{'LEFT BEHIND' if seen['registered'] is not None else 'gone'}; "
        f"inbox: {seen['inbox'] or 'empty'}; wake-ups queued: {seen['wakeups']}")
    for text, stored in seen["stored"].items():
        say(f"   {text!r} in the stored context: {stored}")


async def natural_tries(make_bus, double_stop_once, numbers=range(3, 13)) -> list:
    """The natural race (no hook), each try in an app of its own on a new
    ``make_bus()``: a cancel that lands inside a storage write can leave
    sqlite locked ("database is locked") for the next try."""
    outcomes = []
    for n in numbers:
        async with app_on(make_bus()) as app:
            outcomes.append(await double_stop_once(app, None, n))
    return outcomes


async def main() -> int:
    bus = DoubleStopBus()
    counted: list[tuple[str, Outcome]] = []
    async with app_on(bus) as app:
        say("A. the harness's story: stop 1 lands in the turn tail, a message (409),")
        say("   stop 2 lands in abandon_inbox_consumer's acquire of the inbox lock, stop 3")
        a = await double_stop(app, "acquire", 1)
        a.report()
        await later_delivery(app, a)
        counted.append(("A", a))

        say("A2. the same without stop 3 (a double click only)")
        a2 = await double_stop(app, "acquire", 20, third_stop=False)
        a2.report()
        await later_delivery(app, a2)
        counted.append(("A2", a2))

        say("B. the same, stop 2 lands in abandon_inbox_consumer's registry_del")
        b = await double_stop(app, "registry_del", 2)
        b.report()
        counted.append(("B", b))

    say("C. no hook: stop, stop back to back the moment the UI receives REPLY_END, 10 times")
    natural = await natural_tries(DoubleStopBus, double_stop)
    say(f"   registrations left: {sum(o.dangling for o in natural)}; "
        f"payloads lost: {sum(bool(o.lost()) for o in natural)}")
    for o in natural:
        say(f"   {'LOST' if o.lost() else 'kept'}: {'; '.join(o.presses)}")

    return verdict(
        counted,
        missed="the second cancel did not land in the run's cleanup",
        fine="the second cancel landed in the cleanup, and nothing was lost",
    )


if __name__ == "__main__":
    run_script(main)

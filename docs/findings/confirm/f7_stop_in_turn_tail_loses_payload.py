"""F7 (candidate, refuted): a stop in a wake-run's turn tail loses nothing.

The candidate, from a harness story (2.0.8: payload_arrives(channel→solo),
dispatcher_processes_queue, run_reaches_turn_tail(solo),
user_interrupts(solo)): a channel delivers a payload to the idle session
``solo``, so ``deliver_to_inbox`` queues a wake-up; the wake-up dispatcher
spawns ``wake-run:solo``, whose ``InboxMiddleware`` drains the payload into
the agent's context before reasoning; the model answers with text and the
reply ends ``completed``; the run reaches its turn tail, about to acquire
the inbox lock for ``has_pending_inbox_or_release``. The user presses stop:
the session lock is held, so ``ChatService.interrupt`` publishes on the
interrupt channel and the cancel dispatcher cancels the run task, and the
cancel lands in that acquire. The candidate said the run then released
only the session lock: (a) its inbox-consumer registration stays behind
(producers skip the wake-up until the 600 s lease ends) and (b) the
payload, already out of the inbox, never reaches the stored context.

What the script shows (A, the exit code): on agentscope's own
``InMemoryMessageBus`` the cancel does land in that acquire (the script
reports it), and then ``_run_impl``'s ``finally`` does its work:
``abandon_inbox_consumer`` takes the inbox lock again, finds the inbox
empty and deletes the registration, and the shielded ``_persist`` stores
the agent state, which holds the payload as a hint (``InboxMiddleware``
put it in ``agent.state.context`` before the model call), and trims the
event log. No registration is left, the payload is in the stored context,
the inbox is empty. Nothing is lost, so the candidate is not confirmed.
B then shows a later delivery waking the session as usual, with both
payloads in the stored context. The 600 s lease is not simulated: the
registration is gone at once, so there is nothing for it to expire.

The harness's own playback of the same four steps on 2.0.8 (``playing``
with ``streaming`` on, which the third step needs) agrees: after the
stop, its trace shows the run's ``registry_del`` of the consumer,
``_persist``'s ``log_trim``, then the release of the session lock, and
its settled view of solo has no registration and the payload in the
context. (There the held acquire completes before the cancel lands, so
the registration goes on the normal path; here the cancel lands in the
acquire and the ``finally`` releases it. Either way nothing is left.) So
"only the session lock is released" is not what agentscope does, on its
own bus or in the harness's replay of those steps.

C (information): no hook, the stop sent the moment the UI receives
``REPLY_END``, ten times: every time the registration is gone and the
payload stored.

D (information, a different window, not part of the candidate): a second
payload arrives while the model answers (the run is registered, so no
wake-up: it is left for the turn tail). At the turn tail
``has_pending_inbox_or_release`` drains the inbox into a local list
(taking the payload out) and drains again until a drain comes back empty;
only then does it push what it took back. If the cancel lands during that
second drain (on Redis an ``EVAL`` round trip), the payload is in neither
the inbox nor the context: the ``finally``'s ``abandon_inbox_consumer``
finds the inbox empty, deletes the registration and queues no wake-up.
That payload is lost. D prints what happens and does not set the exit
code: it is a separate finding for the harness to search and a script of
its own to confirm, not the candidate's story.

Releases: 2.0.7 to 2.0.11 (exit 0 on each: the candidate is refuted; D
loses its payload on each). ``app/_bus_ops.py`` (``deliver_to_inbox``,
``has_pending_inbox_or_release``, ``abandon_inbox_consumer``) is
byte-identical across them, and each ``_run_impl`` calls
``abandon_inbox_consumer`` from its ``finally`` before the shielded
``_persist``.

Exit codes: 1 if, in A, the registration is left behind or the payload is
in neither the stored context nor the inbox; 0 if neither; 2 if the
window was not hit (the cancel did not land in the held acquire), which
would make the run say nothing either way.

How the window is hit: as F3's scenario A. A: a subclass of
``InMemoryMessageBus`` whose acquire of solo's inbox lock, once a
``REPLY_END`` has been published on solo's events, returns only after the
stop request has been answered (at most 1 s). On Redis that acquire is a
network round trip (``SET NX`` with a lease), during which the loop serves
the stop request and the cancel dispatcher's subscription, exactly as
here; the cancel then lands in the acquire, which is the candidate's
window. D: the same subclass, holding the turn tail's second
``queue_drain`` of solo's inbox instead (on Redis an ``EVAL`` round
trip). C: no hook.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f7_stop_in_turn_tail_loses_payload.py
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, hint, in_memory_peek, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import Text  # noqa: E402


class SlowTurnTailBus(InMemoryMessageBus):
    """agentscope's in-memory bus, except that while ``hold`` is set, once
    a ``REPLY_END`` has been published on a session's events, one call of
    that session's turn tail waits until ``stop_answered`` is set, or 1 s:

    - ``hold = "acquire"``: the next acquire of its inbox lock, before the
      lock is taken (A);
    - ``hold = "second drain"``: the second ``queue_drain`` of its inbox
      made while the run holds the inbox lock (D).

    It notes whether a cancel landed in that wait, and the operations on
    the session's inbox keys and event log from then on. With ``hold``
    ``None`` every call goes straight to ``InMemoryMessageBus``."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: str | None = None
        self.reset()

    def reset(self) -> None:
        self.stop_answered = asyncio.Event()
        self.held = asyncio.Event()
        self.cancel_landed = False
        self.after_cancel: list[str] = []
        self._ended: set[str] = set()
        self._tail: str | None = None
        self._drains = 0

    async def _wait_for_stop(self) -> None:
        self.held.set()
        # No asyncio.wait_for: on Python 3.11 it can swallow a cancel that
        # arrives as the awaited event is set.
        asyncio.get_running_loop().call_later(1.0, self.stop_answered.set)
        try:
            await self.stop_answered.wait()
        except asyncio.CancelledError:
            self.cancel_landed = True
            raise

    def _note(self, text: str) -> None:
        if self.cancel_landed:
            self.after_cancel.append(text)

    async def publish(self, key: str, payload: dict) -> None:
        if self.hold and payload.get("type") == "REPLY_END":
            self._ended.add(key.rsplit(":", 1)[-1])
        await super().publish(key, payload)

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        session = key.rsplit(":", 1)[-1]
        inbox_lock = key == MessageBusKeys.inbox_lock(session)
        if inbox_lock and session in self._ended:
            if self.hold == "acquire":
                self._ended.discard(session)
                await self._wait_for_stop()
            elif self.hold == "second drain":
                self._ended.discard(session)
                self._tail, self._drains = session, 0
        if inbox_lock:
            self._note("acquire inbox lock")
        try:
            async with super().acquire_lock(key, ttl_secs=ttl_secs):
                yield
        finally:
            if inbox_lock:
                self._tail = None
                self._note("release inbox lock")

    async def queue_drain(self, key: str, max_count: int = 100):
        if self._tail is not None and key == MessageBusKeys.inbox(self._tail):
            self._drains += 1
            if self._drains == 2:
                self._tail = None
                await self._wait_for_stop()
        drained = await super().queue_drain(key, max_count)
        if key.startswith(MessageBusKeys.inbox("")):
            self._note(f"queue_drain inbox -> {len(drained)}")
        return drained

    async def queue_push(self, key: str, payload: dict, **kwargs):
        if key.startswith(MessageBusKeys.inbox("")):
            self._note("queue_push inbox")
        return await super().queue_push(key, payload, **kwargs)

    async def registry_del(self, namespace: str, field: str) -> None:
        if namespace.startswith(MessageBusKeys.inbox_consumer("")):
            self._note("registry_del inbox consumer")
        await super().registry_del(namespace, field)

    async def log_trim(self, *args, **kwargs):
        self._note("log_trim (the run's _persist)")
        return await super().log_trim(*args, **kwargs)


@dataclass
class Outcome:
    stop_status: int | None
    cancel_landed: bool
    after_stop: list[str]
    """Events the UI received after the stop was pressed."""
    after_cancel: list[str]
    """The run's inbox and event-log operations after the cancel."""
    registered: object
    """``MessageBusKeys.inbox_consumer(session)``'s value: ``None`` when
    no registration is left."""
    stored: dict[str, bool]
    """Each payload's text: whether the stored context has it."""
    inbox: list[str]
    wakeups: int
    session_locked: bool

    @property
    def dangling(self) -> bool:
        return self.registered is not None

    def lost(self) -> list[str]:
        return [
            text for text, stored in self.stored.items()
            if not stored and not any(text in queued for queued in self.inbox)
        ]

    def report(self) -> None:
        say(f"   stop: HTTP {self.stop_status}; the cancel landed in the held call: "
            f"{self.cancel_landed}")
        say(f"   the run after the cancel: {self.after_cancel or 'nothing on the inbox keys'}")
        say(f"   events after the stop: {self.after_stop or 'none'}")
        say(f"   inbox consumer registration: "
            f"{'LEFT BEHIND (' + repr(self.registered) + ')' if self.dangling else 'gone'}; "
            f"session lock held: {self.session_locked}")
        for text, stored in self.stored.items():
            say(f"   {text!r} in the stored context: {stored}")
        say(f"   still queued in the inbox: {self.inbox or 'nothing'}; "
            f"wake-ups queued: {self.wakeups}")


async def look(app: App, agent: str, session: str, texts: list[str], **seen) -> Outcome:
    """The session as it stands: registration, stored context, inbox."""
    bus = app.bus
    stored_text = await app.context_texts(agent, session)
    return Outcome(
        cancel_landed=bus.cancel_landed,
        after_cancel=list(bus.after_cancel),
        registered=await bus.registry_get(
            MessageBusKeys.inbox_consumer(session),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
        ),
        stored={text: text in stored_text for text in texts},
        inbox=[str(p.get("hint", p)) for p in in_memory_peek(bus, MessageBusKeys.inbox(session))],
        wakeups=len(in_memory_peek(bus, MessageBusKeys.wakeup_queue())),
        session_locked=await bus.is_locked(MessageBusKeys.session_lock(session)),
        **seen,
    )


async def stop_in_turn_tail(
    app: App,
    hold: str | None,
    number: int,
    *,
    second_payload: bool = False,
) -> Outcome:
    """A channel delivers to an idle session; the wake-run drains it and
    its model answers with text; the user presses stop once the run is
    held in its turn tail (``hold``), or, with no hold, the moment the UI
    receives ``REPLY_END``. With ``second_payload`` a team member
    delivers a second payload while the model answers."""
    bus: SlowTurnTailBus = app.bus
    bus.reset()
    bus.hold = hold
    agent = await app.add_agent("solo")
    session = await app.add_session(agent, "solo")
    ui = await app.tap(session)
    app.script("solo").add(Text("noted"))
    first = f"channel: build {number} on main is red"
    second = f"teammate: build {number} is fixed"

    async def while_answering(_script: str) -> None:
        if second_payload:
            await app.deliver(agent, session, hint(second, "team member"))

    app.book.while_answering = while_answering
    pressed_at: list[int] = []
    status: list[int] = []

    async def user() -> None:
        if hold is None:
            await ui.wait_for("REPLY_END")
        else:
            await bus.held.wait()
        pressed_at.append(len(ui.events))
        status.append(await app.press_stop(agent, session))
        bus.stop_answered.set()

    pressing = asyncio.create_task(user())
    await app.deliver(agent, session, hint(first, "channel"))
    await pressing
    await app.settle()
    bus.hold = None
    app.book.while_answering = None
    outcome = await look(
        app, agent, session, [first, second] if second_payload else [first],
        stop_status=status[0],
        after_stop=[describe(e) for e in ui.events[pressed_at[0]:]],
    )
    outcome.agent, outcome.session, outcome.ui = agent, session, ui
    return outcome


async def main() -> int:
    bus = SlowTurnTailBus()
    async with app_on(bus) as app:
        say("A. the candidate: a wake-run's reply has ended; the stop's cancel lands in the")
        say("   turn tail's acquire of the inbox lock")
        a = await stop_in_turn_tail(app, "acquire", 1)
        a.report()

        say("B. later: a team member delivers to solo")
        later = "teammate: please look at it"
        await app.deliver(a.agent, a.session, hint(later, "team member"))
        await asyncio.sleep(0.3)
        await app.settle()
        b = await look(
            app, a.agent, a.session, [*a.stored, later],
            stop_status=None, after_stop=[],
        )
        runs = [describe(e) for e in a.ui.reply_ends()]
        say(f"   replies ended so far: {runs}")
        for text, stored in b.stored.items():
            say(f"   {text!r} in the stored context: {stored}")
        say(f"   registration: {'LEFT BEHIND' if b.dangling else 'gone'}; "
            f"inbox: {b.inbox or 'empty'}")
        say("   (the 600 s lease is not simulated: no registration is left to expire)")

        say("C. no hook: stop sent the moment the UI receives REPLY_END, 10 times")
        natural = [await stop_in_turn_tail(app, None, n) for n in range(2, 12)]
        say(f"   stops answered 202: {sum(o.stop_status == 202 for o in natural)} of 10; "
            f"registrations left: {sum(o.dangling for o in natural)}; "
            f"payloads lost: {sum(bool(o.lost()) for o in natural)}")

        say("D. information, another window: a second payload arrives while the model")
        say("   answers; the cancel lands in the turn tail's second queue_drain")
        d = await stop_in_turn_tail(app, "second drain", 12, second_payload=True)
        d.report()
        if d.cancel_landed and d.lost():
            say(f"   LOST: {d.lost()} (in neither the inbox nor the stored context; "
                "not the candidate's story, not counted in the exit code)")

    window_hit = a.cancel_landed and a.stop_status == 202
    if not window_hit:
        say(f"window not hit on agentscope {VERSION}: the cancel did not land in the turn tail")
        return 2
    if a.dangling or a.lost():
        say(
            f"CONFIRMED on agentscope {VERSION}: "
            + "; ".join(
                part for part in (
                    "the inbox consumer registration is left behind" if a.dangling else "",
                    f"payload lost: {a.lost()}" if a.lost() else "",
                ) if part
            ),
        )
        return 1
    say(
        f"not reproduced on agentscope {VERSION}: the cancel landed in the turn tail, "
        "and the run's finally released the registration and stored the payload",
    )
    return 0


if __name__ == "__main__":
    run_script(main)

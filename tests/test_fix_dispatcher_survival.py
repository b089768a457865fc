"""The dispatcher-survival fix: a failed dispatch is retried a bounded
number of times with growing delays, then given up with a record.

Driven on agentscope's own ``WakeupDispatcher`` and ``InMemoryMessageBus``
with the fix applied (and removed after each test); storage is a stub whose
``get_session`` raises for the sessions a test poisons, the chat service a
stub that records the runs it is asked for. The event loop's clock is
virtual and jumps to the next timer whenever nothing else can run, so the
fix's backoff (up to half a minute) costs no wall time and the delays
between attempts are exact.

On a release the fix does not target, only the refusal is checked.
"""
from __future__ import annotations

import asyncio
import logging
import selectors

import pytest
from agentscope.app.message_bus import MessageBusKeys

from reference_fix import dispatcher_survival as fix

from fix_checks import check_diff_file, check_refusals

REFUSAL = fix.PATCH.refusal()
targeted = pytest.mark.skipif(REFUSAL is not None, reason=REFUSAL or "")

DEAD_LETTERS = MessageBusKeys.wakeup_queue() + fix.DEAD_LETTER_SUFFIX


def test_refuses_releases_and_code_it_was_not_written_for():
    check_refusals((fix.PATCH,))


@targeted
def test_the_diff_file_is_the_runtime_change():
    check_diff_file((fix.PATCH,), "dispatcher-survival")


@targeted
def test_the_patch_reads_the_backoff_it_documents():
    from agentscope.app._manager import _wakeup_dispatcher

    assert _wakeup_dispatcher._RESUME_RETRY_BACKOFF_SECS == fix.BASE_DELAY  # pylint: disable=protected-access
    assert fix.delays() == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
    assert fix.give_up_after() == pytest.approx(32.7)


# ── a virtual clock that jumps ────────────────────────────────────────


class _JumpingSelector(selectors.DefaultSelector):
    """Never waits: where the loop would sleep until its next timer, the
    loop's clock jumps there instead."""

    def __init__(self, loop: "_JumpingLoop") -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout=None):
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("nothing left to run and no timer set: the test would hang")
        self._loop.now += timeout
        return []


class _JumpingLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self.now


def run_on_jumping_clock(main):
    """Run ``main()`` on a loop whose clock jumps; cancel what it leaves."""
    loop = _JumpingLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


# ── the world: agentscope's dispatcher and bus, stub storage and runs ──


class _Storage:
    """``get_session`` raises for each poisoned session as many times as
    it is told (``None``: every time), and records every call."""

    def __init__(self, failures: dict[str, int | None]) -> None:
        self.failures = dict(failures)
        self.calls: list[tuple[float, str]] = []

    async def get_session(self, user_id: str, agent_id: str, session_id: str):
        self.calls.append((asyncio.get_running_loop().time(), session_id))
        left = self.failures.get(session_id, 0)
        if left is None or left > 0:
            if left is not None:
                self.failures[session_id] = left - 1
            raise ConnectionError(f"storage unavailable for {session_id}")
        return {"session_id": session_id}

    def times(self, session_id: str) -> list[float]:
        return [t for t, sid in self.calls if sid == session_id]


class _ChatService:
    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    async def run(self, *, user_id, session_id, agent_id, input_msg):  # pylint: disable=unused-argument
        self.runs.append((session_id, str(input_msg)))


class Records(logging.Handler):
    """Every record logged to the logger it is added to."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _story(failures: dict[str, int | None], sessions: list[str], *, seconds: float, patched: bool = True):
    """Queue a ``wake`` trigger for each of ``sessions`` (one batch), start
    the dispatcher and let ``seconds`` of virtual time pass: the storage
    stub, the runs asked for, the bus operations made, what is left on the
    trigger and dead-letter queues, and the dispatcher's log records."""
    from agentscope.app._bus_ops import enqueue_run_trigger
    from agentscope.app._manager._chat_run_registry import ChatRunRegistry
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher
    from agentscope.app.message_bus import InMemoryMessageBus

    storage, chat = _Storage(failures), _ChatService()
    ops: list[tuple[str, str]] = []
    records = Records()
    as_logger = logging.getLogger("as")

    async def main():
        bus = InMemoryMessageBus()
        for name in ("queue_push", "queue_drain", "publish", "is_locked", "log_append"):
            original = getattr(bus, name)

            def counted(key, *args, _name=name, _original=original, **kwargs):
                ops.append((_name, key))
                return _original(key, *args, **kwargs)

            setattr(bus, name, counted)
        dispatcher = WakeupDispatcher(bus, storage, chat, ChatRunRegistry())
        async with dispatcher:
            # Queued and signalled without yielding to the dispatcher: its
            # loop drains them in one batch.
            for session in sessions:
                await enqueue_run_trigger(bus, "u", session, "a")
            ops.clear()  # what the dispatcher does, from here on
            await asyncio.sleep(seconds)
        left = [p for _, p in await bus.queue_drain(MessageBusKeys.wakeup_queue())]
        dead = [p for _, p in await bus.queue_drain(DEAD_LETTERS)]
        return left, dead

    level = as_logger.level  # the harness silences agentscope's logger
    as_logger.addHandler(records)
    as_logger.setLevel(logging.INFO)
    if patched:
        fix.PATCH.apply()
    try:
        left, dead = run_on_jumping_clock(main)
    finally:
        if patched:
            fix.PATCH.remove()
        as_logger.removeHandler(records)
        as_logger.setLevel(level)
    return storage, chat, ops, left, dead, records.records


def _gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:])]


@targeted
def test_a_trigger_that_always_fails_is_retried_with_growing_delays_then_given_up():
    seconds = fix.give_up_after() + 60
    storage, chat, ops, left, dead, records = _story(
        {"poisoned": None}, ["poisoned", "healthy"], seconds=seconds,
    )
    # The healthy session's trigger, in the same batch, is dispatched once.
    assert chat.runs == [("healthy", "None")]
    assert storage.times("healthy") == [0.0]
    # The poisoned one is tried MAX_ATTEMPTS times, the delays growing
    # from the dispatcher's backoff and capped, and then no more.
    tried = storage.times("poisoned")
    assert len(tried) == fix.MAX_ATTEMPTS
    assert _gaps(tried) == pytest.approx(fix.delays())
    assert tried[-1] == pytest.approx(fix.give_up_after())
    # One push and one signal per retry, one push to the dead letters.
    retries = fix.MAX_ATTEMPTS - 1
    assert ops.count(("publish", MessageBusKeys.wakeup_signal())) == retries
    assert ops.count(("queue_push", MessageBusKeys.wakeup_queue())) == retries
    assert ops.count(("queue_push", DEAD_LETTERS)) == 1
    # What was given up is recorded: on the dead-letter queue, nothing left
    # on the trigger queue, and an error naming session, kind and attempts.
    assert left == []
    assert [(d["session_id"], d["kind"], d["dispatch_attempts"]) for d in dead] == [
        ("poisoned", "wake", fix.MAX_ATTEMPTS),
    ]
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert "giving up on wake trigger for session poisoned" in message
    assert f"after {fix.MAX_ATTEMPTS} failed dispatch attempts" in message and DEAD_LETTERS in message
    assert errors[0].exc_info and "storage unavailable for poisoned" in str(errors[0].exc_info[1])
    # One traceback for the first failure, one-line warnings after it.
    warnings = [r for r in records if r.levelno == logging.WARNING and "retrying in" in r.getMessage()]
    assert len(warnings) == retries
    assert [bool(w.exc_info) for w in warnings] == [True] + [False] * (retries - 1)


@targeted
def test_without_the_fix_the_loop_ends_with_the_batch():
    """The same story on agentscope as released: the poisoned trigger's
    one failure ends the loop, and the healthy trigger behind it in the
    batch is lost."""
    storage, chat, _, left, dead, records = _story(
        {"poisoned": 1}, ["poisoned", "healthy"], seconds=5, patched=False,
    )
    assert chat.runs == [] and storage.times("poisoned") == [0.0] and left == [] and dead == []
    assert [r.getMessage() for r in records] == ["WakeupDispatcher loop crashed; subscription ended."]


@targeted
def test_a_dispatch_that_fails_once_is_retried_and_succeeds():
    storage, chat, ops, left, dead, records = _story({"flaky": 1}, ["flaky"], seconds=5)
    assert chat.runs == [("flaky", "None")]
    assert _gaps(storage.times("flaky")) == pytest.approx([fix.BASE_DELAY])
    assert left == [] and dead == []
    assert ops.count(("publish", MessageBusKeys.wakeup_signal())) == 1
    assert not [r for r in records if r.levelno >= logging.ERROR]


@targeted
def test_a_dispatch_that_succeeds_costs_what_it_did_without_the_fix():
    released = _story({}, ["healthy"], seconds=1, patched=False)
    fixed = _story({}, ["healthy"], seconds=1)
    assert fixed[1].runs == released[1].runs == [("healthy", "None")]
    assert fixed[2] == released[2], "the fix adds no bus operation to a dispatch that succeeds"

"""The resubscribe fix (F4b): a dropped pub/sub subscription no longer ends
the dispatchers' loops.

Run against whichever agentscope is installed: on a release the fix
targets, the story fails without it and holds with it (alone, and stacked
with dispatcher-survival); on any other release the fix refuses.
"""
from __future__ import annotations

import pytest
from agentscope.app.message_bus import MessageBusKeys

from properties.machine import machine_enforcing
from reference_fix import dispatcher_survival, resubscribe

from fix_checks import check_diff_file, check_refusals

REFUSAL = resubscribe.PATCH.refusal()
targeted = pytest.mark.skipif(REFUSAL is not None, reason=REFUSAL or "")


def test_refuses_releases_and_code_it_was_not_written_for():
    check_refusals(resubscribe.PATCHES)


@targeted
def test_the_diff_file_is_the_runtime_change():
    check_diff_file(resubscribe.PATCHES, "resubscribe")


def _drop_then_deliver(*patches) -> tuple[bool, int, list[str]]:
    """The wake-up dispatcher's subscription drops on the next signal; a
    channel then delivers to idle solo. Whether the dispatcher's loop still
    runs, how many payloads wait in solo's inbox once settled, and the I13
    violation if the machine raised one."""
    for patch in patches:
        patch.apply()
    machine = machine_enforcing("I13", bus_faults=True)()
    found = []
    try:
        machine.bus_operation_fails(operation="subscription to wake-up signals", session="solo")
        try:
            machine.payload_arrives(source="channel", to="solo")
            machine.everything_settles()
        except AssertionError as violation:
            found.append(str(violation).splitlines()[0])
        return machine.world.dispatcher() is not None, len(machine.world.observe_session("solo").queued), found
    finally:
        machine.world.close()
        for patch in reversed(patches):
            patch.remove()


@targeted
def test_a_dropped_subscription_ends_the_dispatcher_unless_fixed():
    alive, queued, found = _drop_then_deliver()
    assert (alive, queued) == (False, 1) and found and found[0].startswith("I13")
    assert _drop_then_deliver(*resubscribe.PATCHES) == (True, 0, [])


@targeted
def test_it_stacks_with_dispatcher_survival_which_still_applies_alone():
    assert dispatcher_survival.PATCH.refusal() is None
    assert _drop_then_deliver(dispatcher_survival.PATCH)[0] is False, "survival alone does not cover F4b"
    assert _drop_then_deliver(dispatcher_survival.PATCH, *resubscribe.PATCHES) == (True, 0, [])
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher

    assert not hasattr(WakeupDispatcher, "_drain_missed_triggers"), "remove() takes the added method away"


@targeted
def test_the_cancel_dispatcher_loops_subscribe_again():
    """Each cancel-dispatcher loop's subscription drops on its next message;
    with the fix each loop runs on and subscribes again (the message that
    broke it is lost: pub/sub keeps nothing)."""
    channels = {
        "cancel-dispatcher:session": MessageBusKeys.session_cancel_channel(),
        "cancel-dispatcher:task": MessageBusKeys.task_cancel_channel(),
        "cancel-dispatcher:interrupt": MessageBusKeys.session_interrupt_channel(),
    }

    def loops_alive_after_a_drop() -> list[str]:
        machine = machine_enforcing("I13", bus_faults=True)()
        world = machine.world
        try:
            for channel in channels.values():
                world.bus.fail_next("subscription", channel)
                world.setup(world.bus.publish(channel, {"session_id": "nobody", "task_id": "none"}))
            world.settle()
            live = {a.label for a in world.actors.live()}
            return sorted(label for label in channels if label in live)
        finally:
            world.close()

    assert loops_alive_after_a_drop() == []
    for patch in resubscribe.CANCEL_PATCHES:
        patch.apply()
    try:
        assert loops_alive_after_a_drop() == sorted(channels)
    finally:
        for patch in reversed(resubscribe.CANCEL_PATCHES):
            patch.remove()


# ── the backoff and the handler, on agentscope's own dispatchers ──────
#
# agentscope's WakeupDispatcher and CancelDispatcher on its InMemoryMessageBus,
# whose subscriptions follow a script: "end" (live, then the iterator ends
# at once), "fail" (live, then it raises), ("up", s) (live for s seconds,
# nothing delivered, then it ends), "deliver" (live, one message, then it
# ends); once the script is spent, subscriptions are the bus's own. The
# clock is virtual and jumps (see test_fix_dispatcher_survival).

import asyncio  # noqa: E402
import logging  # noqa: E402

from agentscope.app.message_bus import InMemoryMessageBus  # noqa: E402

from test_fix_dispatcher_survival import Records, run_on_jumping_clock  # noqa: E402


class _ScriptedBus(InMemoryMessageBus):
    def __init__(self, script=()) -> None:
        super().__init__()
        self.script = list(script)
        self.subscribed: list[tuple[str, float]] = []

    async def subscribe(self, key, *, on_ready=None):
        self.subscribed.append((key, asyncio.get_running_loop().time()))
        if not self.script:
            async for message in super().subscribe(key, on_ready=on_ready):
                yield message
            return
        step = self.script.pop(0)
        on_ready()
        if step == "fail":
            raise ConnectionError("connection reset by peer")
        if step == "deliver":
            yield {}
        elif isinstance(step, tuple):
            await asyncio.sleep(step[1])

    def times(self, key: str) -> list[float]:
        return [t for k, t in self.subscribed if k == key]


def _with_fix(play, patches=resubscribe.PATCHES):
    records = Records()
    as_logger = logging.getLogger("as")
    level = as_logger.level  # the harness silences agentscope's logger
    as_logger.addHandler(records)
    as_logger.setLevel(logging.INFO)
    for patch in patches:
        patch.apply()
    try:
        return play(), records.records
    finally:
        for patch in reversed(patches):
            patch.remove()
        as_logger.removeHandler(records)
        as_logger.setLevel(level)


class _Storage:
    """``get_session`` raises for the sessions in ``failing``, once each."""

    def __init__(self, *failing: str) -> None:
        self.failing = set(failing)

    async def get_session(self, user_id, agent_id, session_id):  # pylint: disable=unused-argument
        if session_id in self.failing:
            self.failing.discard(session_id)
            raise ConnectionError(f"storage unavailable for {session_id}")
        return {"session_id": session_id}


class _ChatService:
    def __init__(self) -> None:
        self.runs: list[str] = []

    async def run(self, *, user_id, session_id, agent_id, input_msg):  # pylint: disable=unused-argument
        self.runs.append(session_id)


def _wakeup_dispatcher(script, seconds: float, *triggers: str, storage=None):
    """Start a WakeupDispatcher on a scripted bus, queue ``triggers`` one by
    one (a second apart), let ``seconds`` pass: the bus and the runs."""
    from agentscope.app._bus_ops import enqueue_run_trigger
    from agentscope.app._manager._chat_run_registry import ChatRunRegistry
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher

    bus, chat = _ScriptedBus(script), _ChatService()

    async def main():
        async with WakeupDispatcher(bus, storage or _Storage(), chat, ChatRunRegistry()):
            for session in triggers:
                await enqueue_run_trigger(bus, "u", session, "a")
                await asyncio.sleep(1)
            await asyncio.sleep(seconds)

    run_on_jumping_clock(main)
    return bus, chat


def _backoff(n: int) -> list[float]:
    """The first ``n`` delays of a backoff that never resets."""
    return [min(resubscribe.BASE_DELAY * 2**i, resubscribe.MAX_DELAY) for i in range(n)]


def _gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:])]


@targeted
@pytest.mark.parametrize("flap", ["end", "fail"])
def test_a_flapping_subscription_is_retried_ever_more_slowly(flap):
    """Each subscription comes up and ends (or fails) at once: the backoff
    grows to its cap instead of resetting on every successful subscribe,
    and the log has one traceback, then a line per attempt."""
    (bus, _), records = _with_fix(lambda: _wakeup_dispatcher([flap] * 12, 60))
    times = bus.times(MessageBusKeys.wakeup_signal())
    assert _gaps(times[:13]) == pytest.approx(_backoff(12))
    assert len([t for t in times if t < 3.0]) == 5, "0, 0.1, 0.3, 0.7, 1.5: not ten a second"
    warned = [r for r in records if "resubscribing in" in r.getMessage()]
    assert len(warned) == 12
    tracebacks = [bool(r.exc_info) for r in warned]
    assert tracebacks == ([True] + [False] * 11 if flap == "fail" else [False] * 12)


@targeted
def test_the_backoff_starts_again_only_after_a_healthy_subscription():
    """Up 10 s with nothing delivered is not healthy; up HEALTHY_AFTER s, or
    delivering a message, is."""
    up = resubscribe.HEALTHY_AFTER + 1
    script = ["end", "end", ("up", 10), "end", ("up", up), "end", "end", "deliver", "end"]
    (bus, _), _ = _with_fix(lambda: _wakeup_dispatcher(script, 120))
    gaps = _gaps(bus.times(MessageBusKeys.wakeup_signal()))[: len(script)]
    assert gaps == pytest.approx([0.1, 0.2, 10 + 0.4, 0.8, up + 0.1, 0.2, 0.4, 0.1, 0.2])


@targeted
def test_a_handler_that_raises_does_not_end_the_wakeup_subscription():
    """Without dispatcher-survival, the first trigger's dispatch raises out
    of the drain; the subscription it came on stays, and serves the next."""
    (bus, chat), records = _with_fix(
        lambda: _wakeup_dispatcher([], 5, "broken", "fine", storage=_Storage("broken")),
        patches=(resubscribe.PATCH,),
    )
    assert chat.runs == ["fine"]
    assert len(bus.times(MessageBusKeys.wakeup_signal())) == 1, "subscribed once, never again"
    assert any("handling a message failed; the subscription goes on" in r.getMessage() for r in records)


@targeted
def test_a_handler_that_raises_does_not_end_a_cancel_subscription():
    """The session-cancel handler raises on the first message (the run
    registry fails); the next cancel on the same subscription is served."""
    from agentscope.app._manager._cancel_dispatcher import CancelDispatcher

    class Registry:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def get(self, session_id):
            self.asked.append(session_id)
            if len(self.asked) == 1:
                raise RuntimeError("registry unavailable")

    class Background:
        def __init__(self) -> None:
            self.cancelled: list[str] = []

        def cancel_session_tasks(self, session_id):
            self.cancelled.append(session_id)
            return 0

    bus, registry, background = _ScriptedBus(), Registry(), Background()

    async def main():
        async with CancelDispatcher(bus, registry, background):
            for session in ("first", "second"):
                await bus.publish(MessageBusKeys.session_cancel_channel(), {"session_id": session})
                await asyncio.sleep(1)

    _, records = _with_fix(lambda: run_on_jumping_clock(main), patches=resubscribe.CANCEL_PATCHES)
    assert registry.asked == ["first", "second"] and background.cancelled == ["second"]
    assert len(bus.times(MessageBusKeys.session_cancel_channel())) == 1
    assert any(
        r.getMessage().startswith("CancelDispatcher session-cancel: handling a message failed") for r in records
    )

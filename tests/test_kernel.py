"""The simulation kernel, tested on its own: no agentscope app, only plain
coroutines that stop at switch points (as trio tests its testing tools).

Each test builds a fresh loop on a fresh clock and an :class:`Interleaver`
on it, and drives tasks one switch point at a time.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from fakes.bus import VirtualRedisBus
from harness.kernel.bus_inspector import BusInspector, inspector_of
from harness.kernel.clock import VirtualClock
from harness.kernel.controlled_bus import ControlledBus, InjectedBusFault
from harness.kernel.controlled_storage import SerialStorage
from harness.kernel.event_loop import VirtualTimeEventLoop
from harness.kernel.interleaver import DidNotSettle, Interleaver, Livelock, Op, Restless
from harness.kernel.repeats import LIVELOCK_AFTER


def worker(interleaver: Interleaver, log: list, name: str, steps: int = 2):
    async def run():
        for n in range(steps):
            await interleaver.switch_point(Op("step", f"{name}{n}"))
            log.append(f"{name}{n}")
            interleaver.record("step", f"{name}{n}")
    return run()


# ── virtual time ──────────────────────────────────────────────────────


def test_the_clock_moves_only_forward_and_only_when_told():
    clock = VirtualClock()
    assert clock.now() == 0.0
    clock.advance_by(1.5)
    clock.advance_to(2.0)
    assert clock.now() == 2.0
    with pytest.raises(ValueError):
        clock.advance_to(1.0)
    assert clock.timestamp() == "2026-01-01T00:00:02"
    clock.rewind()
    assert clock.now() == 0.0


def test_a_sleep_ends_when_virtual_time_passes_not_before(kernel):
    woke = []

    async def sleeper():
        await asyncio.sleep(30)
        woke.append(kernel.loop.time())

    kernel.spawn(sleeper(), "sleeper")
    kernel.pass_time(29.9)
    assert woke == []
    kernel.pass_time(0.1)
    assert woke == [30.0]


def test_passing_time_fires_timers_in_order_and_lands_on_the_target(kernel):
    fired = []
    for delay in (5, 1, 3):
        kernel.loop.call_later(delay, fired.append, delay)
    kernel.pass_time(4)
    assert fired == [1, 3]
    assert kernel.loop.clock.now() == 4
    assert kernel.loop.next_timer_deadline() == 5


# ── one task at a time ────────────────────────────────────────────────


def test_a_spawned_task_stops_at_its_first_switch_point(kernel):
    log = []
    record = kernel.spawn(worker(kernel, log, "a"), "a")
    assert record.held and str(record.pending) == "step a0"
    assert log == []
    assert kernel.held() == [record]


def test_the_caller_chooses_which_task_moves(kernel):
    log = []
    a = kernel.spawn(worker(kernel, log, "a"), "a")
    b = kernel.spawn(worker(kernel, log, "b"), "b")
    kernel.advance(b)
    kernel.advance(a)
    kernel.advance(b)
    assert log == ["b0", "a0", "b1"]
    assert b.done and not a.done
    assert [entry.key for entry in kernel.trace.entries] == ["b0", "a0", "b1"]


def test_releasing_a_task_that_is_not_held_is_an_error(kernel):
    record = kernel.spawn(worker(kernel, [], "a", steps=1), "a")
    kernel.advance(record)
    with pytest.raises(RuntimeError, match="not held"):
        kernel.advance(record)


def test_tasks_a_task_creates_are_controlled_and_know_their_parent(kernel):
    log = []

    async def parent():
        child = asyncio.ensure_future(worker(kernel, log, "child", steps=1))
        await kernel.switch_point(Op("step", "parent"))
        await child

    record = kernel.spawn(parent(), "parent")
    (child,) = [r for r in kernel.tasks() if r is not record]
    assert child.parent is record and child.label == "run"
    assert child.held and record.held


def test_labels_are_numbered_by_creation_order(kernel):
    first = kernel.spawn(worker(kernel, [], "a"), "twin")
    second = kernel.spawn(worker(kernel, [], "b"), "twin")
    assert (first.label, second.label) == ("twin", "twin#2")


def test_outside_control_switch_points_do_not_stop_anything(kernel):
    kernel.controlling = False
    log = []
    record = kernel.spawn(worker(kernel, log, "a"), "a")
    assert record.done and log == ["a0", "a1"]


# ── settling ──────────────────────────────────────────────────────────


def test_settling_releases_the_oldest_first_and_jumps_the_clock(kernel):
    log = []

    async def later():
        await asyncio.sleep(600)
        await kernel.switch_point(Op("step", "late"))
        log.append("late")

    kernel.spawn(later(), "later")
    kernel.spawn(worker(kernel, log, "a"), "a")
    kernel.spawn(worker(kernel, log, "b"), "b")
    kernel.settle()
    assert log == ["a0", "a1", "b0", "b1", "late"]  # the oldest held task, each time
    assert kernel.loop.clock.now() == 600
    assert kernel.tasks() == []


def test_a_zero_time_livelock_is_reported_not_run_forever(kernel):
    async def spins():
        while True:
            await kernel.switch_point(Op("step", "spin"))

    kernel.spawn(spins(), "spinner")
    with pytest.raises(DidNotSettle, match="without virtual time passing"):
        kernel.settle(limit=50)


def test_work_due_past_the_horizon_is_reported(kernel):
    async def retries_forever():
        while True:
            await asyncio.sleep(0.1)

    kernel.spawn(retries_forever(), "retry")
    with pytest.raises(DidNotSettle, match="still busy 10 virtual seconds on"):
        kernel.settle(horizon=10)




def test_cancelling_every_task_lets_time_pass_for_a_clean_up(kernel):
    """A clean-up that polls for a lock until a lease runs out finishes:
    a process that shuts down lets time pass."""
    log = []

    async def polls_in_its_clean_up():
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(30)
            log.append(kernel.loop.time())

    kernel.controlling = False
    kernel.loop.create_task(polls_in_its_clean_up())
    kernel.run_uncontrolled(kernel.cancel_every_task(horizon=3600))
    assert log == [30.0] and not kernel.tasks()

@pytest.mark.parametrize("processes, restless", [(1, True), (2, False)])
def test_the_busy_budget_is_per_process_of_agentscope(kernel, processes, restless):
    """75 operations a virtual second for 200 s: more than one process'
    budget (3000 + 50 a second), within two processes' (each drains the
    trigger queue on every wake-up signal)."""
    kernel.skip_repeats = False

    async def retries_for_a_while():
        for n in range(15000):
            await asyncio.sleep(1 / 75)
            await kernel.switch_point(Op("step", "retry"))
            kernel.record("step", f"retry{n % 2}")

    kernel.processes = processes
    kernel.spawn(retries_for_a_while(), "retry")
    if restless:
        with pytest.raises(Restless, match="more than 3000 \\+ 50 a second"):
            kernel.settle()
    else:
        kernel.settle()
        assert not kernel.tasks()

# ── crashes ───────────────────────────────────────────────────────────


def test_a_crashed_task_and_its_children_never_move_again(kernel):
    log = []

    async def parent():
        child = asyncio.ensure_future(worker(kernel, log, "child"))
        await kernel.switch_point(Op("step", "parent"))
        log.append("parent")
        await child

    record = kernel.spawn(parent(), "parent")
    other = kernel.spawn(worker(kernel, log, "other", steps=1), "other")
    doomed = kernel.crash(record)
    assert len(doomed) == 2 and record in doomed
    assert kernel.tasks() == [other]
    kernel.settle()
    assert log == ["other0"]
    assert all(not r.done for r in doomed)
    assert kernel.crashed() == doomed


def test_a_task_a_dead_nodes_task_starts_later_is_dead_too(kernel):
    """A dead node's timer may still wake its task in the harness; what
    that task starts must not run (it would renew a lease, say)."""
    log = []

    async def parent():
        await asyncio.sleep(5)  # not a switch point: the crash finds it here
        child = asyncio.ensure_future(worker(kernel, log, "late child"))
        await child

    record = kernel.spawn(parent(), "parent")
    kernel.crash_node(record.node)
    kernel.pass_time(10)
    kernel.settle()
    assert log == []
    assert len(kernel.crashed()) == 2 and kernel.crashed()[0] is record


# ── storage and the bus under control ─────────────────────────────────


def test_storage_calls_are_serialised_and_counted(kernel):
    order = []

    class Store:
        async def get_thing(self, name):
            order.append(f"get {name}")
            return name

        async def put_thing(self, name):
            order.append(f"put {name} start")
            await asyncio.sleep(0)
            order.append(f"put {name} end")

    storage = SerialStorage(Store(), kernel)

    async def both():
        await asyncio.gather(storage.put_thing("a"), storage.put_thing("b"), storage.get_thing("c"))

    kernel.run_uncontrolled(both())
    assert order == ["put a start", "put a end", "put b start", "put b end", "get c"]
    assert storage.writes == 2


def test_every_bus_operation_is_a_switch_point_and_a_trace_line(kernel):
    bus = ControlledBus(VirtualRedisBus(kernel.loop.clock.now), kernel)

    async def producer():
        await bus.queue_push("q", {"hint": "hello"})
        return await bus.queue_drain("q")

    record = kernel.spawn(producer(), "producer")
    assert str(record.pending) == "queue_push q"
    kernel.advance(record)
    assert str(record.pending) == "queue_drain q"
    kernel.advance(record)
    assert record.done and record.task.result()[0][1] == {"hint": "hello"}
    assert [(e.op, e.detail) for e in kernel.trace.entries] == [
        ("queue_push", "hint hello"),
        ("queue_drain", "1 entries"),
    ]


def test_an_injected_fault_fails_the_next_matching_operation_only(kernel):
    bus = ControlledBus(VirtualRedisBus(kernel.loop.clock.now), kernel)
    bus.fail_next("queue_drain", "q")

    async def drains():
        try:
            await bus.queue_drain("q")
        except InjectedBusFault:
            return "failed", await bus.queue_drain("q")
        return "ok", None

    record = kernel.spawn(drains(), "drains")
    kernel.settle()
    assert record.task.result() == ("failed", [])


def test_a_cancel_landing_in_a_call_loses_only_the_reply(kernel):
    """On Redis the request is written before the caller first waits: a
    task cancelled while held at a call has it applied all the same."""
    fake, bus = _bus(kernel)

    async def drains():
        await bus.queue_push("q", {"hint": "one"})
        await bus.queue_drain("q")

    record = kernel.spawn(drains(), "drains")
    kernel.advance(record)  # the push
    assert str(record.pending) == "queue_drain q"
    record.task.cancel()
    kernel.settle()
    assert record.task.cancelled()
    assert fake.peek_queue("q") == []  # drained: the server applied it
    assert kernel.trace.entries[-1].detail == "APPLIED, then CANCELLED (the reply is lost)"


def test_a_cancel_landing_in_the_call_after_a_cut_one_sends_nothing(kernel):
    """redis-py closes a connection whose reply a cancel cut short, so the
    task's next call connects again before it writes: a cancel re-armed
    into it (``ChatService`` does so) lands before anything is sent. Once a
    call goes through, a cancel applies the call again."""
    fake, bus = _bus(kernel)

    async def pushes():
        for n in range(4):
            try:
                await bus.queue_push("q", {"hint": str(n)})
            except asyncio.CancelledError:
                pass

    record = kernel.spawn(pushes(), "pushes")  # held at push 0

    def queued():
        return [p["hint"] for p in fake.peek_queue("q")]

    record.task.cancel()
    kernel.quiesce()
    assert queued() == ["0"]  # applied, its reply cut: the connection closes
    record.task.cancel()
    kernel.quiesce()
    assert queued() == ["0"]  # the cancel lands in the reconnect
    kernel.advance(record)
    assert queued() == ["0", "2"]
    record.task.cancel()
    kernel.quiesce()
    assert queued() == ["0", "2", "3"]  # connected again: applied, reply cut
    kernel.settle()
    details = [e.detail for e in kernel.trace.entries if e.op == "queue_push"]
    assert details == [
        "APPLIED, then CANCELLED (the reply is lost)",
        "CANCELLED while reconnecting (not sent)",
        "hint 2",
        "APPLIED, then CANCELLED (the reply is lost)",
    ]



def test_a_bus_the_harness_cannot_inspect_is_refused():
    assert isinstance(VirtualRedisBus(lambda: 0.0), BusInspector)
    with pytest.raises(TypeError, match="cannot be inspected.*peek_queue"):
        inspector_of(object())


# ── faults true to Redis: each allows a story the fault-free bus forbids ─


def _bus(kernel):
    fake = VirtualRedisBus(kernel.loop.clock.now)
    return fake, ControlledBus(fake, kernel)


@pytest.mark.parametrize("after", [False, True])
def test_a_failed_drain_loses_the_entries_only_if_the_server_applied_it(kernel, after):
    fake, bus = _bus(kernel)

    async def story():
        await bus.queue_push("q", {"hint": "one"})
        bus.fail_next("queue_drain", "q", after=after)
        try:
            await bus.queue_drain("q")
        except InjectedBusFault:
            return fake.peek_queue("q")
        return "no fault"

    record = kernel.spawn(story(), "story")
    kernel.settle()
    assert record.task.result() == ([] if after else [{"hint": "one"}])


def test_a_failed_publish_reaches_no_subscriber(kernel):
    _, bus = _bus(kernel)
    received = []

    async def listens():
        async for message in bus.subscribe("ch"):
            received.append(message["n"])

    async def publishes():
        await bus.publish("ch", {"n": 1})
        bus.fail_next("publish", "ch")
        try:
            await bus.publish("ch", {"n": 2})
        except InjectedBusFault:
            pass
        await bus.publish("ch", {"n": 3})

    kernel.spawn(listens(), "listener")
    kernel.settle()
    kernel.spawn(publishes(), "publisher")
    kernel.settle()
    assert received == [1, 3]


@pytest.mark.parametrize("renewal_fails", [False, True])
def test_a_failed_heartbeat_lets_a_second_holder_in_under_a_live_one(kernel, renewal_fails):
    fake, bus = _bus(kernel)
    kernel.controlling = False  # no switch points: only time and the lock decide
    inside = []

    async def holds(name):
        async with bus.acquire_lock("lock", ttl_secs=600):
            inside.append(name)
            await asyncio.sleep(10_000)

    kernel.spawn(holds("first"), "first")
    kernel.spawn(holds("second"), "second")
    if renewal_fails:
        assert fake.renewal_fails("lock") and fake.faults_fired == ["lock"]
    kernel.pass_time(301)
    kernel.quiesce()
    assert inside == (["first", "second"] if renewal_fails else ["first"])
    assert len(bus.inside["lock"]) == len(inside)  # two holders at once: I6's story


@pytest.mark.parametrize("release_fails", [False, True])
def test_a_failed_release_keeps_the_lock_until_its_lease_runs_out(kernel, release_fails):
    fake, bus = _bus(kernel)
    entered = []

    async def holds_briefly():
        async with bus.acquire_lock("lock", ttl_secs=600):
            await asyncio.sleep(1)

    async def waits():
        async with bus.acquire_lock("lock", ttl_secs=600):
            entered.append(kernel.loop.time())

    if release_fails:
        fake.release_fails("lock")
    kernel.spawn(holds_briefly(), "holder")
    kernel.spawn(waits(), "waiter")
    kernel.settle()
    assert entered == ([301.0] if release_fails else [1.0])


@pytest.mark.parametrize("drops", [False, True])
def test_a_dropped_subscription_ends_its_subscribers_stream(kernel, drops):
    _, bus = _bus(kernel)
    received = []

    async def listens():
        async for message in bus.subscribe("ch"):
            received.append(message["n"])

    async def publishes():
        for n in (1, 2):
            await bus.publish("ch", {"n": n})

    listener = kernel.spawn(listens(), "listener")
    kernel.settle()
    if drops:
        bus.fail_next("subscription", "ch")
    kernel.spawn(publishes(), "publisher")
    kernel.settle()
    assert received == ([] if drops else [1, 2])
    assert listener.done == drops
    if drops:
        assert isinstance(listener.task.exception(), InjectedBusFault)


@pytest.mark.parametrize("overtaken", [False, True])
def test_a_polling_waiter_may_be_overtaken_by_a_third_party(kernel, overtaken):
    fake, bus = _bus(kernel)
    order = []

    async def holds_briefly():
        async with bus.acquire_lock("lock", ttl_secs=600):
            await asyncio.sleep(1)

    async def acquires(name):
        async with bus.acquire_lock("lock", ttl_secs=600):
            order.append(name)

    if overtaken:
        fake.waiter_overtaken("lock")
    kernel.spawn(holds_briefly(), "holder")
    kernel.advance(kernel.held()[0])  # the holder takes the lock
    waiter = kernel.spawn(acquires("waiter"), "waiter")
    kernel.advance(waiter)  # waits for the holder
    third = kernel.spawn(acquires("third"), "third")  # held at its acquire
    kernel.pass_time(1)  # the holder leaves; the waiter wakes
    kernel.advance(third)  # the third party's SET NX comes now
    kernel.settle()
    assert order == (["third", "waiter"] if overtaken else ["waiter", "third"])
    assert fake.faults_fired == []  # a timing, not a failure


# ── a world that only repeats itself ──────────────────────────────────


def _retries_until(kernel, log: list, free_at: float | None):
    """A dispatcher's retry loop: every 0.1 s it asks whether a lock is
    still held (a lease running out at ``free_at``, or never), then runs
    once it is free."""

    async def retry():
        while True:
            await kernel.switch_point(Op("is_locked", "lock"))
            held = free_at is None or kernel.loop.clock.now() < free_at
            kernel.record("is_locked", "lock", str(held))
            if not held:
                log.append(kernel.loop.clock.now())
                return
            await asyncio.sleep(0.1)

    return retry()


@pytest.mark.parametrize("skip", [True, False])
def test_a_repetition_behind_a_lease_is_left_out_and_ends_as_played(kernel, skip):
    log = []
    kernel.expiries = lambda: [30.0] if kernel.loop.clock.now() < 30.0 else []
    kernel.skip_repeats = skip
    kernel.spawn(_retries_until(kernel, log, free_at=30.0), "retry")
    kernel.settle()
    lines = [(e.seq, e.task, e.op, e.detail) for e in kernel.trace.entries]
    # The same clock reading when the lock is found free, bit for bit, and
    # the same trace numbering: 300 checks while held (0 s to 29.9 s), then
    # the free one.
    played = 0.0
    for _ in range(300):
        played = played + 0.1
    assert log == [played] and played > 30.0
    assert lines[-1] == (301, "retry", "is_locked", "False")
    assert lines[-2] == (300, "retry", "is_locked", "True")
    if skip:
        assert kernel.skipped > 250 and len(lines) < 20
        assert any(op == "left out" for _, _, op, _ in lines)
    else:
        assert kernel.skipped == 0 and len(lines) == 301


def test_a_world_that_only_repeats_itself_is_a_livelock(kernel):
    kernel.expiries = lambda: []  # the bus holds nothing that expires
    kernel.spawn(_retries_until(kernel, [], free_at=None), "retry")
    with pytest.raises(Livelock, match="only repeats itself"):
        kernel.settle()
    assert len(kernel.trace.entries) < 2 * LIVELOCK_AFTER


def test_without_the_bus_s_expiries_nothing_is_left_out_or_called_a_livelock(kernel):
    kernel.spawn(_retries_until(kernel, [], free_at=None), "retry")
    with pytest.raises(DidNotSettle, match="still busy 10 virtual seconds on") as raised:
        kernel.settle(horizon=10)
    assert not isinstance(raised.value, Livelock)
    assert kernel.skipped == 0 and len(kernel.trace.entries) > 90  # every 0.1 s played


@pytest.mark.parametrize("offset", [0.0, 0.05])
def test_several_retry_loops_at_once_are_left_out_together(offset):
    """Two loops retrying at once (in step, or taking turns) repeat as one
    cycle: left out together, they end as when played."""

    def play(skip: bool) -> tuple[list, float]:
        clock = VirtualClock()
        loop = VirtualTimeEventLoop(clock)
        interleaver = Interleaver(loop)
        interleaver.controlling = True
        interleaver.skip_repeats = skip
        interleaver.expiries = lambda: [30.0] if clock.now() < 30.0 else []

        async def late(loop_=_retries_until(interleaver, [], free_at=30.0)):
            await asyncio.sleep(offset)
            await loop_

        interleaver.spawn(_retries_until(interleaver, [], free_at=30.0), "a")
        interleaver.spawn(late(), "b")
        interleaver.settle()
        lines = [(e.seq, e.task, e.op, e.detail) for e in interleaver.trace.entries]
        loop.set_task_factory(None)
        loop.close()
        return lines, clock.now(), interleaver.skipped

    played, played_at, none = play(skip=False)
    skipped, skipped_at, left_out = play(skip=True)
    assert none == 0 and left_out > 250
    assert skipped_at == played_at
    assert skipped[-8:] == played[-8:] and len(skipped) < 40


def test_a_waiter_woken_a_hair_before_a_dead_lease_ends_takes_the_lock(kernel):
    """asyncio fires a timer within its clock resolution (1 ns) of due:
    another timer landing the clock 3e-13 s before a dead holder's lease
    ends wakes its waiter, which must find the lease over (Redis keeps TTLs
    to the millisecond), not wait again, woken at once, forever."""
    fake, bus = _bus(kernel)
    entered = []

    async def dies_holding():
        async with bus.acquire_lock("lock", ttl_secs=600):
            await kernel.switch_point(Op("step", "never"))

    async def waits():
        async with bus.acquire_lock("lock", ttl_secs=600):
            entered.append(kernel.loop.time())

    async def ticks():
        await asyncio.sleep(299.9999999999997)

    holder = kernel.spawn(dies_holding(), "holder")
    kernel.advance(holder)  # it takes the lock
    fake.process_died([r.task for r in kernel.crash(holder)])
    kernel.spawn(waits(), "waiter")
    kernel.spawn(ticks(), "ticker")
    kernel.settle()
    assert entered == [299.9999999999997]


def test_serial_storage_hands_each_write_to_written_done_or_not(kernel):
    """Reads are not handed on; a write is, with its arguments by name, and
    ``done`` says whether it returned."""
    seen = []

    class Store:
        async def get_thing(self, name):
            return name

        async def put_thing(self, name, size=1):
            if name == "bad":
                raise ValueError(name)
            return f"put {name}"

    class Watched(SerialStorage):
        def written(self, name, arguments, result, done):
            seen.append((name, arguments, result, done))

    storage = Watched(Store(), kernel)
    kernel.run_uncontrolled(storage.get_thing("a"))
    kernel.run_uncontrolled(storage.put_thing("b", size=2))
    with pytest.raises(ValueError):
        kernel.run_uncontrolled(storage.put_thing(name="bad"))
    assert seen == [
        ("put_thing", {"name": "b", "size": 2}, "put b", True),
        ("put_thing", {"name": "bad"}, None, False),
    ]


def outside_work(kernel: Interleaver, seconds: float):
    """Work that leaves the loop for ``seconds`` of wall-clock time (a
    round trip to a server), as the loop sees it."""

    async def work():
        kernel.outside_work_started()
        try:
            await asyncio.get_running_loop().run_in_executor(None, time.sleep, seconds)
        finally:
            kernel.outside_work_finished()
    return work()


def test_harness_code_that_starts_tasks_moves_them_one_step_at_a_time(kernel):
    """The slower reply of two commands sent at once would come second;
    started one step at a time, the oldest task's comes first."""
    log = []

    async def slow():
        await kernel.switch_point(Op("step", "slow"))
        await outside_work(kernel, 0.05)
        log.append("slow")

    async def fast():
        await kernel.switch_point(Op("step", "fast"))
        log.append("fast")

    async def start():
        asyncio.get_running_loop().create_task(slow())
        asyncio.get_running_loop().create_task(fast())
        return "started"

    assert kernel.run_one_step_at_a_time(start()) == "started"
    assert log == ["slow", "fast"]
    assert not kernel.held()


def test_cancelling_every_task_lands_no_cancel_inside_outside_work(kernel):
    """A call in flight ends as it would; the tasks are cancelled where
    they wait, and so is a task a cancelled one starts in its clean-up."""
    log = []

    async def calls_out():
        await outside_work(kernel, 0.05)
        log.append("call ended")
        await asyncio.Event().wait()

    async def cleans_up():
        try:
            await asyncio.Event().wait()
        finally:
            asyncio.get_running_loop().create_task(asyncio.Event().wait(), name="left-by-clean-up")

    kernel.controlling = False
    for coro in (calls_out(), cleans_up()):
        kernel.loop.create_task(coro)
    kernel.run_uncontrolled(kernel.cancel_every_task(horizon=3600))
    assert log == ["call ended"]
    assert not kernel.tasks()

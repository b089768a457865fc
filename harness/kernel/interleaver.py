"""The controlled loop: one task moves at a time, and the harness picks which.

Every task created on the loop while the interleaver is in control is a
*controlled task*. A controlled task stops at each **switch point** (every
bus operation, see :class:`~harness.kernel.controlled_bus.ControlledBus`) and stays
held there until :meth:`Interleaver.advance` releases it. Between switch
points it runs like ordinary asyncio code.

:meth:`Interleaver.quiesce` is the one primitive everything else is built on
(trio's ``wait_all_tasks_blocked``): run the loop until no callback is ready
and no outside work is in flight (a storage call, a round trip to a real
Redis server, a pub/sub message on its way), i.e. every live task is held
at a switch point, waiting on a virtual timer, or blocked on something only
another task can release. At that moment the set of held tasks is a pure function of
the choices made so far, so the choice of which to release next can be a
Hypothesis draw: it shrinks, and it replays.

Labels are deterministic (agentscope's own task names where it gives them,
the coroutine's name otherwise, numbered by creation order), because they
appear in shrunk programs and in traces.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine, Iterable
from typing import Any, Callable

from .deaths import Deaths
from .ends import Ends
from .event_loop import VirtualTimeEventLoop
from .tasks import ControlledTask, Op  # noqa: F401  (re-exported)
from .repeats import LIVELOCK_AFTER, SKIP_AFTER, Checkpoint, Repeats, Skip, base_label, describe, frame_of, renumbered
from .trace import Trace

#: Releases at one virtual instant before a world counts as livelocked.
SETTLE_STEP_LIMIT = 5000

#: Virtual seconds a world may keep busy while settling: longer than any
#: lease agentscope sets (600 s), so a dispatcher retrying every 0.1 s
#: behind a crashed run's lock settles, and one retrying forever does not.
SETTLE_HORIZON = 3600.0

#: Bus operations settling may play before its rate is counted, and the
#: rate (per virtual second) it may not exceed beyond them, per process
#: of agentscope. The busiest settles of the suite's searches, fixes on or
#: off, played under 1,800 operations, at most 50 a virtual second over
#: 30 s (the inbox sweeper); agentscope's own retry of a trigger behind a
#: held lock (every 0.1 s, four operations) plays 40 a second; each more
#: process drains on every wake-up signal, one more drain a retry. Exact
#: repetitions left out (:mod:`.repeats`) are not counted.
BUSY_BASE = 3000
BUSY_RATE = 50.0


class DidNotSettle(AssertionError):
    """Raised when releasing tasks and advancing time never reaches rest."""


class Restless(DidNotSettle):
    """Settling costs more work than a world at rest could: more bus
    operations than :data:`BUSY_BASE` plus :data:`BUSY_RATE` per virtual
    second (a retry storm, a session woken again and again). Said within
    seconds, where playing it to the horizon would take minutes."""


class Livelock(DidNotSettle):
    """The world only repeats itself, nothing due to change it (:mod:`.repeats`)."""


class Interleaver(Deaths, Ends):
    """Owns the loop's task factory, the switch points and quiescence.

    (agentscope has a ``SchedulerManager`` of its own, for timed jobs; this
    is not that: it decides which task moves next.)"""

    def __init__(
        self,
        loop: VirtualTimeEventLoop,
        rename: Callable[[str], str] = lambda name: name,
    ) -> None:
        self.loop = loop
        self._rename = rename
        self.trace = Trace()
        self._records: dict[asyncio.Task, ControlledTask] = {}
        self._order: list[ControlledTask] = []
        self._live: list[ControlledTask] = []
        self._unlabelled: list[ControlledTask] = []
        self._crashed: list[ControlledTask] = []
        self._dead_nodes: set[int] = set()
        self._finished: list[ControlledTask] = []
        self._label_counts: Counter[str] = Counter()
        self._creating_internal = False
        self._outside_work = 0
        #: Outside work started so far (a stretch of work with any is
        #: never left out as a repeat: see :mod:`.repeats`).
        self._outside_work_done = 0
        self._outside_idle: asyncio.Event | None = None
        #: Switch points only park tasks while this is set (not in setup).
        self.controlling = False
        #: The node a task with no controlled parent belongs to.
        self.building_node = 0
        #: Whether labels name each task's node (``@n``): worlds of
        #: several nodes.
        self.label_nodes = False
        #: The processes of agentscope in the world (the busy budget is
        #: per process).
        self.processes = 1
        #: When the bus changes by itself (leases, TTLs); without it, no
        #: repetition is ever left out and none is a livelock.
        self.expiries: Callable[[], Iterable[float]] | None = None
        #: Asked as settling goes: why the world is busier than a world at
        #: rest could be, beyond its bus operations (``None``: it is not).
        self.too_busy: Callable[[], str | None] = lambda: None
        #: Whether settling leaves out repetitions (off: all are played).
        self.skip_repeats = True
        #: Repetitions left out while settling, so far (see :mod:`.repeats`).
        self.skipped = 0
        loop.set_task_factory(self._task_factory)

    # ── task registry ─────────────────────────────────────────────────

    def _task_factory(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine,
        **kwargs: Any,
    ) -> asyncio.Task:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        if not self._creating_internal:
            qualname = getattr(coro, "__qualname__", type(coro).__name__)
            creator = asyncio.current_task(loop)
            parent = self._records.get(creator) if creator else None
            record = ControlledTask(task, len(self._order), qualname, parent)
            if parent is None:
                record.node = self.building_node
            elif parent.node in self._dead_nodes and parent in self._crashed:
                self._crashed.append(record)  # a dead node starts nothing that runs
            self._records[task] = record
            self._order.append(record)
            self._live.append(record)
            self._unlabelled.append(record)
        return task

    def _label(self, record: ControlledTask) -> str:
        if record.label is None:
            name = record.task.get_name()
            if name.startswith("Task-"):
                name = record.qualname.split(".")[-1]
            name = self._rename(name)
            if self.label_nodes:
                name = f"{name}@{record.node}"
            self._label_counts[name] += 1
            count = self._label_counts[name]
            record.label = name if count == 1 else f"{name}#{count}"
        return record.label

    def _label_new_tasks(self) -> None:
        for record in self._unlabelled:
            self._label(record)
        self._unlabelled.clear()

    def current_label(self) -> str:
        """Label of the running task; ``harness`` outside control."""
        task = asyncio.current_task()
        record = self._records.get(task) if task else None
        return self._label(record) if record else "harness"

    def label_of(self, task: asyncio.Task) -> str:
        """The label of any task; uncontrolled ones are ``harness``."""
        record = self._records.get(task)
        return self._label(record) if record else "harness"

    def tasks(self) -> list[ControlledTask]:
        """Every controlled task that is still alive (and not crashed),
        oldest first."""
        self._label_new_tasks()
        self._finished.extend(r for r in self._live if r.done)
        self._live = [r for r in self._live if not r.done]
        return [r for r in self._live if r not in self._crashed]

    def creators(self) -> dict[str, str]:
        """Each task's label -> the label of the task that created it."""
        return {self._label(r): self._label(r.parent) for r in self._order if r.parent is not None}

    def failures(self) -> list[tuple[ControlledTask, BaseException]]:
        """Tasks that ended with an exception (not a cancellation) since
        the last call, each reported once, oldest first. Reading the
        exception here is what asyncio counts as retrieving it."""
        self.tasks()
        finished, self._finished = self._finished, []
        return [
            (r, r.task.exception())
            for r in sorted(finished, key=lambda r: r.index)
            if not r.task.cancelled() and r.task.exception() is not None
        ]

    def held(self) -> list[ControlledTask]:
        """Live tasks held at a switch point, oldest first."""
        return [r for r in self.tasks() if r.held]

    # ── switch points ─────────────────────────────────────────────────

    async def switch_point(self, op: Op) -> None:
        """Park the calling task until the harness releases it."""
        task = asyncio.current_task()
        record = self._records.get(task) if task else None
        if record is None or not self.controlling:
            return
        self._label(record)
        record.pending = op
        record.gate = self.loop.create_future()
        try:
            await record.gate
        finally:
            record.gate = None
            record.pending = None

    def record(self, op: str, key: str, detail: str = "") -> None:
        """Append an executed operation to the trace."""
        self.trace.record(self.current_label(), op, key, detail)

    # ── outside work (what the loop waits for without a callback) ─────

    def outside_work_started(self) -> None:
        """Work left the loop (a storage call, a Redis round trip, a
        message on its way to a subscriber): the world is not quiet until
        it is back."""
        self._outside_work += 1
        self._outside_work_done += 1
        self._idle_event().clear()

    def outside_work_finished(self) -> None:
        self._outside_work -= 1
        if self._outside_work == 0:
            self._idle_event().set()

    def _idle_event(self) -> asyncio.Event:
        if self._outside_idle is None:
            self._outside_idle = asyncio.Event()
            self._outside_idle.set()
        return self._outside_idle

    # ── driving ───────────────────────────────────────────────────────

    def run_uncontrolled(self, coro: Coroutine) -> Any:
        """Run harness code (setup, inspection) to completion.

        The coroutine itself is not a controlled task, but any task it
        creates is. Only call this when the world is quiescent.
        """
        return self.loop.run_until_complete(self._internal_task(coro))

    async def _until_quiescent(self) -> None:
        while True:
            await asyncio.sleep(0)
            if self._outside_work:
                await self._idle_event().wait()
                continue
            if not self.loop.has_ready_callbacks():
                return

    def quiesce(self) -> None:
        """Run until nothing can move without a release or a clock jump."""
        self.run_uncontrolled(self._until_quiescent())
        self._label_new_tasks()

    def spawn(self, coro: Coroutine, label: str, node: int = 0) -> ControlledTask:
        """Start a controlled task on ``node`` and run until it first parks
        or ends."""
        self.building_node = node
        try:
            task = self.loop.create_task(coro, name=label)
        finally:
            self.building_node = 0
        record = self._records[task]
        self.quiesce()
        return record

    def advance(self, record: ControlledTask) -> None:
        """Release one held task past its switch point, then quiesce."""
        self._release(record)
        self.quiesce()

    def _release(self, record: ControlledTask) -> None:
        if not record.held:
            raise RuntimeError(f"{record!r} is not held at a switch point")
        assert record.gate is not None
        record.gate.set_result(None)

    def settle(self, limit: int = SETTLE_STEP_LIMIT, horizon: float = SETTLE_HORIZON) -> None:
        """Let everything finish: release held tasks oldest first and
        jump the clock to the next timer whenever nothing else can move.
        Raises :class:`DidNotSettle` on ``limit`` releases without the
        clock moving, or when work is still due ``horizon`` virtual seconds
        on, and :class:`Livelock` when the world only repeats itself with
        nothing due to change it; repetitions that change nothing are left
        out (:mod:`.repeats`). (One coroutine does it all: re-entering the
        loop for each of thousands of releases costs.)"""
        self.run_uncontrolled(self._settle(limit, horizon))
        self._label_new_tasks()

    async def _settle(self, limit: int, horizon: float) -> None:
        started, first_op = self.loop.clock.now(), len(self.trace.entries)
        give_up_at = started + horizon
        steps = 0
        repeats = Repeats(self.expiries, self.skip_repeats)
        mark = self._frame_start(frozenset())
        while True:
            await self._until_quiescent()
            self._check_work(first_op, self.loop.clock.now() - started)
            held = self.held()
            if held:
                steps += 1
                if steps > limit:
                    raise DidNotSettle(f"{limit} releases without virtual time passing; "
                                       f"still held: {self.held()}")
                self._release(held[0])
                continue
            deadline = self.loop.next_timer_deadline()
            if deadline is None:
                return
            repeats.checkpoint(self._checkpoint(mark))
            frame = repeats.livelock(give_up_at)
            if frame is not None:
                raise Livelock(f"the world only repeats itself ({describe(frame, LIVELOCK_AFTER)}), with "
                               f"nothing due to change it (now {self.loop.clock.now():g} s)")
            if deadline > give_up_at:
                frame = repeats.repeated()
                if frame is not None:  # repetitions left out up to the horizon
                    raise Livelock(f"the world only repeats itself ({describe(frame, SKIP_AFTER)}) "
                                   f"until {horizon:g} virtual seconds on")
                raise DidNotSettle(f"still busy {horizon:g} virtual seconds on: a timer is due "
                                   f"at {deadline:g} s (now {self.loop.clock.now():g} s)")
            skip = repeats.skip(give_up_at)
            if skip is not None:
                self._skip(skip)
                deadline = self.loop.next_timer_deadline()
            self.loop.clock.advance_to(max(deadline, self.loop.clock.now()))
            mark = self._frame_start(self.loop.live_timers())
            steps = 0

    def _check_work(self, first_op: int, elapsed: float) -> None:
        """Raise :class:`Restless` once settling has played more bus
        operations than its budget for ``elapsed`` virtual seconds."""
        why = self.too_busy()
        if why is not None:
            raise Restless(why)
        base, rate = BUSY_BASE * self.processes, BUSY_RATE * self.processes
        if len(self.trace.entries) - first_op <= base + rate * elapsed:
            return
        played = self.trace.entries[first_op:]
        busiest = Counter(f"{base_label(e.task)} {e.op}" for e in played).most_common(3)
        raise Restless(
            f"{len(played)} bus operations in {elapsed:g} virtual seconds of settling, more than "
            f"{base} + {rate:g} a second; the busiest: "
            + ", ".join(f"{what} ×{n}" for what, n in busiest),
        )

    def _frame_start(self, timers: frozenset) -> tuple[int, int, int, frozenset]:  # see _checkpoint
        return len(self.trace.entries), len(self._order), self._outside_work_done, timers

    def _checkpoint(self, mark: tuple[int, int, int, frozenset]) -> Checkpoint:
        """The frame since ``mark`` (see :mod:`.repeats`)."""
        entries, created, storage, before = mark
        timers = self.loop.live_timers()
        labels = [self._label(r) for r in self.tasks()]
        frame = frame_of(self.trace.entries[entries:], labels, self._outside_work_done - storage,
                         (self.loop.delay_of(h) for h in timers - before))
        return Checkpoint(frame, self.loop.clock.now(), timers, timers - before,
                          tuple(sorted(self.expiries())) if self.expiries else (),
                          Counter(base_label(self._label(r)) for r in self._order[created:]))

    def _skip(self, skip: Skip) -> None:
        """Leave ``skip.count`` repetitions out: the clock, the next one's
        timer, and the numbering of tasks and trace move on as they would."""
        start = self.loop.clock.now()
        self.loop.clock.advance_to(skip.now)
        for timer, when in skip.timers:
            self.loop.reschedule(timer, when)
        for name, created in skip.new_tasks.items():
            self._label_counts[name] += created * skip.count
        for record in self._order[len(self._order) - sum(skip.new_tasks.values()):]:
            if record.label is not None and not record.done:  # the next repetition's
                record.label = renumbered(record.label, skip)
        self.trace.skipped(skip.ops * skip.count, f"the last {skip.ops} operations, {skip.count} times more "
                           f"({start:g} s to {skip.now:g} s), left out: the same operations and outcomes")
        self.skipped += skip.count

    def pass_time(self, seconds: float) -> None:
        """Jump the clock forward, firing each timer that falls due."""
        target = self.loop.clock.now() + seconds
        while True:
            self.quiesce()
            deadline = self.loop.next_timer_deadline()
            if deadline is None or deadline > target:
                break
            self.loop.clock.advance_to(max(deadline, self.loop.clock.now()))
        self.loop.clock.advance_to(target)
        self.quiesce()

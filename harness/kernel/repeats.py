"""A world that only repeats itself, told apart from one that progresses.

While the world settles, the clock jumps each time nothing can move
without it. The stretch of work between two such jumps is a **frame**: the
bus operations made (by task, with their outcomes), the tasks alive after
them, the storage calls, and the timers left pending. When the same frame
comes round again and again (a dispatcher re-queueing a trigger every
0.1 s behind a crashed run's session lock, a session woken over and over
with nothing new), the world is repeating itself, and two things follow:

- **Skipping.** A repetition that touches no storage and appends no event
  is a pure function of the bus and the clock: played again it would do
  exactly what it did, until the first moment something changes by itself
  (a lease or TTL on the bus expires, a timer from before the repetition
  falls due). Those repetitions are not played; the clock moves on as they
  would have moved it (the same floating-point additions of the same
  delay), the task labels and trace sequence numbers count them, and the
  last :data:`MARGIN` repetitions before the change are played for real.
  What agentscope sees from there on is what it would have seen: the same
  clock readings, the same bus state, the same next operations.
- **Livelock.** A repetition with nothing due to change it (no timer from
  before it, no lease or TTL set before it) that has come round
  :data:`LIVELOCK_AFTER` times is a livelock (known only on a bus that
  says when it expires): the world is reported as not
  settling, with the repeated operations, after a fixed number of frames,
  never a wall-clock time.

Nothing here reads agentscope or the bus: the bus's expiries come through
a callable (``Interleaver.expiries``), and without one nothing is skipped.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .trace import TraceEntry

#: Identical frames in a row before the repetition is skipped.
SKIP_AFTER = 3

#: Repetitions played for real before the first moment anything changes.
MARGIN = 2

#: The most frames a repeated cycle may take (one per retry loop taking
#: turns with the others).
LONGEST_CYCLE = 4

#: Identical frames in a row, with nothing due to change them, that make
#: a livelock.
LIVELOCK_AFTER = 20

#: Operations a skippable frame may not make: an appended event is what
#: the properties read.
UNSKIPPABLE_OPS = frozenset({"log_append"})

_NUMBERED = re.compile(r"#\d+$")


def base_label(label: str) -> str:
    """A task label without its creation number (``retry#7`` -> ``retry``)."""
    return _NUMBERED.sub("", label)


@dataclass(frozen=True)
class Frame:
    """The work between two clock jumps, as far as it repeats."""

    ops: tuple[tuple[str, str, str, str], ...]
    """(task label without its number, operation, key, outcome)."""
    tasks: tuple[str, ...]
    """Live tasks after it, by label without number, sorted."""
    storage_calls: int
    delays: tuple[float, ...]
    """Delays of the timers it set that are still pending, sorted (-1 for
    one set at a given time rather than after a delay)."""


@dataclass
class Checkpoint:
    """A frame, and the moment it ended."""

    frame: Frame
    now: float
    timers: frozenset
    """Pending timer handles (identity) when it ended."""
    cycle: frozenset
    """Those of them it set."""
    expiries: tuple[float, ...]
    """When the bus changes by itself, as it stood then."""
    new_tasks: Counter
    """Tasks it created, by label without number."""


@dataclass(frozen=True)
class Skip:
    """Repetitions to leave out: ``count`` of them, each of ``delay``
    virtual seconds and ``ops`` operations, ending at ``now``."""

    count: int
    timers: tuple
    """The pending timers of the cycle, each with when it falls due once
    the repetitions are left out."""
    delay: float
    now: float
    ops: int
    new_tasks: Counter
    frame: Frame


def advance(now: float, delay: float, times: int) -> float:
    """``now`` after ``times`` jumps of ``delay``, added as the loop adds
    them (one at a time, so the result is bit-for-bit the same)."""
    for _ in range(times):
        now = now + delay
    return now


class Repeats:
    """The frames of one settling, and what their repetition allows."""

    def __init__(self, expiries: Callable[[], Iterable[float]] | None, skipping: bool = True) -> None:
        self._expiries = expiries
        self._skipping = skipping
        self._checkpoints: list[Checkpoint] = []

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """The frame that just ended."""
        self._checkpoints.append(checkpoint)
        del self._checkpoints[:-LIVELOCK_AFTER]

    def expiries(self) -> tuple[float, ...]:
        """When the bus next changes by itself, sorted (empty without a
        hook)."""
        return tuple(sorted(self._expiries())) if self._expiries else ()

    def _repeating(self, times: int) -> list[Checkpoint] | None:
        last = self._checkpoints[-times:]
        if len(last) < times or any(c.frame != last[-1].frame for c in last):
            return None
        return last

    def repeated(self) -> Frame | None:
        """The frame the last :data:`SKIP_AFTER` frames repeated, if they
        did (and made any operation)."""
        last = self._repeating(SKIP_AFTER)
        if self._expiries is None or not last or not last[-1].frame.ops:
            return None
        return last[-1].frame

    def skip(self, horizon: float) -> Skip | None:
        """How many repetitions can be left out now, if the last frames
        repeat a cycle of one to :data:`LONGEST_CYCLE` frames (several
        retry loops at once take turns) :data:`SKIP_AFTER` times, with no
        storage call and no event, each frame firing one timer of the
        cycle and setting the next one (all of the same delay), every other
        timer untouched; the repetitions left out all end :data:`MARGIN`
        cycles before the first change (``horizon``, a timer from before
        them, a bus expiry)."""
        if not self._skipping or self._expiries is None:
            return None
        for period in range(1, LONGEST_CYCLE + 1):
            skip = self._skip_cycle(period, horizon)
            if skip is not None:
                return skip
        return None

    def _skip_cycle(self, period: int, horizon: float) -> Skip | None:
        last = self._checkpoints[-SKIP_AFTER * period:]
        if len(last) < SKIP_AFTER * period:
            return None
        frames = [c.frame for c in last]
        if any(frames[n] != frames[n - period] for n in range(period, len(frames))):
            return None
        if any(f.storage_calls or any(op[1] in UNSKIPPABLE_OPS for op in f.ops) for f in frames[-period:]):
            return None
        delays = {d for f in frames[-period:] for d in f.delays}
        if len(delays) != 1 or min(delays) <= 0:
            return None
        (delay,) = delays
        cycle_timers = sorted(frozenset().union(*(c.cycle for c in last[-period:])), key=lambda h: h.when())
        fixed = None
        for n in range(period, len(last)):
            ours = frozenset().union(*(c.cycle for c in last[n - period + 1:n + 1]))
            if not last[n].cycle or not ours <= last[n].timers:
                return None
            if last[n].now != last[n - period].now + delay:  # it began when its timer fell due
                return None
            if fixed is not None and last[n].timers - ours != fixed:
                return None
            fixed = last[n].timers - ours
        limit = min((horizon, *(h.when() for h in fixed), *self.expiries()))
        whens = [h.when() for h in cycle_timers]
        count = 0
        probes = [advance(w, delay, 1 + MARGIN) for w in whens]
        while max(probes) < limit:
            count += 1
            probes = [p + delay for p in probes]
        if count < 1:
            return None
        moved = [advance(w, delay, count) for w in whens]
        if any((a < b) != (x < y) or (a == b) != (x == y)
               for a, x in zip(whens, moved) for b, y in zip(whens, moved)):
            return None  # the cycle's timers would fall due in another order
        new_tasks = sum((c.new_tasks for c in last[-period:]), Counter())
        ops = sum(len(f.ops) for f in frames[-period:])
        return Skip(count, tuple(zip(cycle_timers, moved)), delay,
                    advance(last[-1].now, delay, count), ops, new_tasks, frames[-1])

    def livelock(self, horizon: float) -> Frame | None:
        """The repeated frame, when the last :data:`LIVELOCK_AFTER` frames
        are identical and nothing set before them falls due before
        ``horizon`` (when settling gives up): no timer from before the
        first of them, and no bus expiry that stood still through all of
        them (one moving on with the clock is renewed by the repetition
        itself)."""
        last = self._repeating(LIVELOCK_AFTER)
        if self._expiries is None or last is None or not last[-1].frame.ops:
            return None
        if any(h.when() < horizon for h in (last[0].timers - last[0].cycle) & last[-1].timers):
            return None
        standing = set(last[0].expiries)
        for checkpoint in last[1:]:
            standing &= set(checkpoint.expiries)
        if any(t < horizon for t in standing):
            return None
        return last[-1].frame


def renumbered(label: str, skip: Skip) -> str:
    """The label a task of the last repetition played takes once
    ``skip.count`` repetitions are left out before it."""
    name = base_label(label)
    number = int(label[len(name) + 1:] or 1) + skip.new_tasks[name] * skip.count
    return f"{name}#{number}"


def frame_of(entries: list[TraceEntry], tasks: Iterable[str], storage_calls: int,
             delays: Iterable[float]) -> Frame:
    """A frame from its trace entries, the live tasks' labels, its storage
    calls and the delays of the timers it left pending."""
    return Frame(
        ops=tuple((base_label(e.task), e.op, e.key, e.detail) for e in entries),
        tasks=tuple(sorted(base_label(t) for t in tasks)),
        storage_calls=storage_calls,
        delays=tuple(sorted(delays)),
    )


def describe(frame: Frame, times: int) -> str:
    """The repeated frame, for a report."""
    ops = "; ".join(f"{task} {op} {key}" + (f" -> {detail}" if detail else "")
                    for task, op, key, detail in frame.ops)
    return f"the same {len(frame.ops)} bus operations {times} times over: {ops}"

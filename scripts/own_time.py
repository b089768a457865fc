"""How much of a story's time is agentscope's own, measured from outside.

``benchmark.py`` uses this to split a story's wall time between
agentscope and the harness without touching either: no function of
agentscope or of the harness is wrapped, and no harness module reads the
clock (a harness that did could not be deterministic).

A wall-clock timer (``setitimer(ITIMER_REAL)``) interrupts the loop's
thread every :data:`INTERVAL` seconds, and the signal handler looks at the
frame that thread was in and at its callers, innermost first, to the first
one it can name:

- **storage wait**: the loop's selector (``selectors``' ``select``), where
  the loop's thread blocks until aiosqlite's worker thread posts a query's
  answer back (on the fake bus nothing else makes it block: its time is
  virtual, it never sleeps);
- **storage**: agentscope's SQL storage below its own code, SQLAlchemy and
  aiosqlite. The harness reaches them only through agentscope's storage,
  so this is agentscope's storage calls' time wherever it is called from (a
  session SQLAlchemy closes from a loop callback has no agentscope frame
  above it);
- **agentscope**: a frame whose code file is under agentscope's package
  folder;
- **the loop**: asyncio's event loop machinery (``base_events``,
  ``events``, ``selector_events``, ``unix_events``) below the harness's
  call that runs the loop: stepping tasks, almost all of them agentscope's,
  as agentscope's own loop would (the floor's loop, run by this script, is
  the same);
- **the harness**: a frame under this project's ``harness``, ``fakes``,
  ``properties``, ``reference_fix``, ``scripts`` or ``docs``.

Any other frame (the rest of the standard library, Hypothesis, pydantic)
counts as its caller's: pydantic under agentscope is agentscope's;
asyncio stepping an agentscope task is agentscope's from the task's first
agentscope frame; the fake bus, the scripted model and the controlled
storage's proxy, called by agentscope, are the harness's; so are
Hypothesis and the interleaver. Each sample stands for one interval, so
``own = samples / (every sample but the harness's)``. The loop's
machinery also wakes the tasks the interleaver holds at its switch points,
which agentscope alone would not need: :meth:`Samples.own_without_loop`
(the loop counted as the harness's) bounds ``own`` from above. The storage
wait grows when the machine is loaded (the worker thread waits for a core
while the loop's thread waits for it), which lowers ``own``:
:meth:`Samples.own_busy` leaves the wait out of both sides.

A sampler, not a profile hook: ``sys.setprofile`` turns off CPython
3.11's specialising interpreter and slowed stories about tenfold, unevenly
between agentscope and the harness. The signal goes to the loop's thread
only (:func:`signals_to_this_thread_only`: every thread started later,
aiosqlite's workers among them, blocks it), so a sample is taken where that
thread is at that moment; the sampler costs a few per cent, which falls on
both sides alike.
"""
from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Wall seconds between two samples.
INTERVAL = 0.001

#: What a sample can land in.
AGENTSCOPE, STORAGE, WAIT, LOOP, HARNESS = "agentscope", "storage", "storage wait", "loop", "harness"

#: Folders of the libraries below agentscope's storage.
STORAGE_LIBRARIES = ("/sqlalchemy/", "/aiosqlite/")

#: asyncio's event loop machinery.
LOOP_MODULES = tuple(f"/asyncio/{name}.py" for name in
                     ("base_events", "events", "selector_events", "unix_events"))

#: The project's own folders (the harness and what drives it).
OWN_FOLDERS = tuple(str(ROOT / name) + "/" for name in
                    ("harness", "fakes", "properties", "reference_fix", "scripts", "docs"))


def signals_to_this_thread_only() -> None:
    """Block the sampler's signal in every thread started from now on
    (they inherit this thread's mask); :class:`Sampler` unblocks it here
    while it samples. Call before anything starts a thread."""
    assert threading.current_thread() is threading.main_thread()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})


@dataclass
class Samples:
    """Samples per category, and the wall seconds they were taken over."""

    counts: dict[str, int] = field(
        default_factory=lambda: {AGENTSCOPE: 0, STORAGE: 0, WAIT: 0, LOOP: 0, HARNESS: 0},
    )
    seconds: float = 0.0

    def add(self, other: Samples) -> None:
        """Count ``other``'s samples in these."""
        for category, count in other.counts.items():
            self.counts[category] += count
        self.seconds += other.seconds

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def own(self) -> float:
        """A story's time over agentscope's own calls' time in it."""
        return self.total / (self.total - self.counts[HARNESS])

    def own_without_loop(self) -> float:
        """:meth:`own` with the loop's machinery counted as the harness's."""
        return self.total / (self.counts[AGENTSCOPE] + self.counts[STORAGE] + self.counts[WAIT])

    def own_busy(self) -> float:
        """:meth:`own` of the loop thread's work alone, the storage wait
        left out of both sides: it grows when the machine is loaded (the
        storage thread waits for a core), this does not."""
        busy = self.total - self.counts[WAIT]
        return busy / (busy - self.counts[HARNESS])

    def describe(self) -> str:
        shares = ", ".join(f"{name} {100 * n / self.total:.0f}%" for name, n in self.counts.items())
        return (f"{self.total} samples over {self.seconds:.1f} s (one per "
                f"{1000 * self.seconds / self.total:.2f} ms): {shares}")


class Sampler:
    """Samples this thread every :data:`INTERVAL` while the block runs,
    adding them to :attr:`samples` (one sampler may run several blocks)."""

    def __init__(self) -> None:
        self.samples = Samples()
        self._categories: dict = {}
        import agentscope  # pylint: disable=import-outside-toplevel

        self._agentscope = str(Path(agentscope.__file__).resolve().parent) + "/"

    def _category(self, code) -> str | None:
        name, path = code.co_name, code.co_filename
        if path.startswith(self._agentscope):
            return AGENTSCOPE
        if path.startswith(OWN_FOLDERS):
            return HARNESS
        if name == "select" and path.endswith("selectors.py"):
            return WAIT
        if any(library in path for library in STORAGE_LIBRARIES):
            return STORAGE
        if path.endswith(LOOP_MODULES):
            return LOOP
        return None  # its caller's

    def _sample(self, _signum, frame) -> None:
        categories = self._categories
        while frame is not None:
            code = frame.f_code
            try:
                category = categories[code]
            except KeyError:
                category = categories[code] = self._category(code)
            if category is not None:
                self.samples.counts[category] += 1
                return
            frame = frame.f_back
        self.samples.counts[HARNESS] += 1  # nothing named: the script's own

    def __enter__(self) -> Sampler:
        import time  # pylint: disable=import-outside-toplevel

        self._previous = signal.signal(signal.SIGALRM, self._sample)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        self._start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, INTERVAL, INTERVAL)
        return self

    def __exit__(self, *exc) -> None:
        import time  # pylint: disable=import-outside-toplevel

        signal.setitimer(signal.ITIMER_REAL, 0)
        self.samples.seconds += time.perf_counter() - self._start
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        signal.signal(signal.SIGALRM, self._previous)

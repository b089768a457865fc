"""An asyncio event loop that reads the virtual clock and never blocks on it.

``loop.time()`` is :meth:`VirtualClock.now`, so ``asyncio.sleep``,
``call_later`` and ``wait_for`` timeouts inside agentscope run on virtual
time. Executor work (``asyncio.to_thread``) runs inline on the loop's
thread, so it cannot complete in an order the OS chooses.

Two views into ``BaseEventLoop`` internals (``_ready`` and ``_scheduled``,
unchanged since Python 3.4) let the interleaver tell "nothing can run right
now" from "something is about to run", which is what quiescence means. The
one write, :meth:`VirtualTimeEventLoop.reschedule`, moves a pending timer
when a repetition of the world is left out (:mod:`.repeats`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import heapq
import weakref
from typing import Any, Callable

from .clock import VirtualClock


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs submitted callables immediately, on the calling thread.

    A ``ThreadPoolExecutor`` only because asyncio insists on one; it never
    starts a thread.
    """

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any):
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # pylint: disable=broad-except
            future.set_exception(exc)
        return future


class VirtualTimeEventLoop(asyncio.SelectorEventLoop):
    """A selector loop whose time is virtual and whose executor is inline."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock
        self.set_default_executor(InlineExecutor())
        self._delays: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def time(self) -> float:
        return self.clock.now()

    def has_ready_callbacks(self) -> bool:
        """Whether some callback is queued to run on the next iteration."""
        return bool(self._ready)

    def call_later(self, delay, callback, *args, context=None):
        """As asyncio's, remembering the delay (see :meth:`delay_of`)."""
        handle = super().call_later(delay, callback, *args, context=context)
        self._delays[handle] = delay
        return handle

    def delay_of(self, handle: asyncio.TimerHandle) -> float:
        """The delay ``handle`` was set with, or -1 when it was set for a
        given time."""
        return self._delays.get(handle, -1.0)

    def live_timers(self) -> frozenset:
        """Every pending timer that is not cancelled."""
        return frozenset(h for h in self._scheduled if not h.cancelled())

    def reschedule(self, handle: asyncio.TimerHandle, when: float) -> None:
        """Move a pending timer to ``when`` (the settling of a world that
        repeats itself, :mod:`.repeats`, moves the next repetition's
        timer to where it would have been)."""
        handle._when = when  # pylint: disable=protected-access
        heapq.heapify(self._scheduled)

    def next_timer_deadline(self) -> float | None:
        """When the earliest live timer fires, or ``None``."""
        live = [h.when() for h in self._scheduled if not h.cancelled()]
        return min(live) if live else None

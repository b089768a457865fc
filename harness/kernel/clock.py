"""Virtual time: the only clock the world under test ever reads.

The event loop, the fake bus' TTLs and leases, and agentscope's own
timestamp hook all read :class:`VirtualClock`. Time moves only when the
harness says so (:meth:`VirtualClock.advance_to`), so a dispatcher backoff
or a 600 s lease costs no wall time and replays identically. The idea is
trio's ``MockClock`` without autojump: jumping is an explicit step, because
"time passes" is itself one of the stories the harness tells.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

#: The virtual epoch: what timestamps read at ``now() == 0``. Naive, as
#: the ``datetime.now()`` stamps it stands in for are.
EPOCH = datetime(2026, 1, 1)


class VirtualClock:
    """Seconds since the start of a world, advanced only on request."""

    def __init__(self) -> None:
        self._now = 0.0
        #: Called with the seconds that passed, after each move forward:
        #: what else keeps time (a real Redis server's TTLs) follows.
        self.followers: list[Callable[[float], None]] = []

    def now(self) -> float:
        """Current virtual time in seconds."""
        return self._now

    def advance_to(self, when: float) -> None:
        """Move time forward to ``when``; never backwards."""
        if when < self._now:
            raise ValueError(
                f"virtual time cannot go back from {self._now} to {when}",
            )
        before, self._now = self._now, when
        if when > before:
            for follow in list(self.followers):
                follow(when - before)

    def advance_by(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self.advance_to(self._now + seconds)

    def rewind(self) -> None:
        """Back to zero, for the next story on the same loop (its timers
        must all be gone: a timer left behind would never fire)."""
        self._now = 0.0

    def timestamp(self) -> str:
        """The current virtual time as an ISO 8601 string (what a wall-clock
        timestamp hook would return)."""
        return (EPOCH + timedelta(seconds=self._now)).isoformat()

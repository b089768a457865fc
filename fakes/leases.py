"""Locks with leases, as Redis keeps them: the lock half of
:class:`~fakes.bus.VirtualRedisBus`.

A held lock stands for a live holder whose heartbeat renews its lease; the
lease only runs out when nobody renews it any more: its holder's process
died (:meth:`LeasedLocks.process_died`), its heartbeat failed
(:meth:`LeasedLocks.renewal_fails`) or its release failed
(:meth:`LeasedLocks.release_fails`). Time is the bus's virtual clock.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

#: How often RedisMessageBus polls for a freed lock.
POLL_SECONDS = 0.1

#: A lease this close to its end counts as ended: asyncio fires a timer
#: that close to due (its clock resolution), so a waiter woken for the
#: expiry must find it expired, or it waits again, woken at once, forever.
#: (Redis keeps TTLs to the millisecond.)
EXPIRY_RESOLUTION = 1e-9


@dataclass
class _Lease:
    """A lock value: who holds it and until when, if nobody renews it."""

    token: str
    expires_at: float
    owner: asyncio.Task | None = None
    ttl: float = 0.0
    renewed: bool = True
    """Whether a live holder still renews it (its heartbeat has not failed)."""




class LeasedLocks:
    """Mode E of the ``MessageBus`` interface, with lease semantics."""

    _clock: Callable[[], float]

    def _init_locks(self) -> None:
        self._tokens = itertools.count(1)
        self._locks: dict[str, _Lease] = {}
        self._lock_changed: dict[str, asyncio.Event] = {}
        #: Tasks of a process that died: their leases are no longer renewed.
        self._dead: set[asyncio.Task] = set()
        #: Locks whose next release fails (the lease is left to expire).
        self._failing_releases: set[str] = set()
        #: Keys on which an injected lease fault fired (renewal, release).
        self.faults_fired: list[str] = []
        #: Locks whose next woken waiter polls once before retrying.
        self._overtaking: set[str] = set()

    def _lease(self, key: str) -> _Lease | None:
        """The live lease on ``key``, renewing it while its holder lives."""
        lease = self._locks.get(key)
        if lease is None:
            return None
        now = self._clock()
        if self._renewing(lease):
            return lease  # the heartbeat keeps it renewed
        if lease.expires_at <= now + EXPIRY_RESOLUTION:
            del self._locks[key]
            self._signal_lock(key)
            return None
        return lease

    def _renewing(self, lease: _Lease) -> bool:
        """Whether someone keeps ``lease`` renewed: a live holder whose
        heartbeat has not failed."""
        return lease.renewed and self._alive(lease.owner)

    def _alive(self, owner: asyncio.Task | None) -> bool:
        """Whether a lease's holder still renews it (Redis' heartbeat)."""
        return owner is not None and not owner.done() and owner not in self._dead

    def process_died(self, tasks: list[asyncio.Task]) -> None:
        """The process running ``tasks`` died without cleaning up: from
        now on nobody renews their leases. A live holder renews every half
        TTL (as agentscope's Redis bus does), so a lease outlives its holder
        by between half a TTL and a whole one; taken here as half (the
        crash came just before the next renewal)."""
        now = self._clock()
        self._dead.update(tasks)
        for lease in self._locks.values():
            if lease.owner in self._dead:
                lease.expires_at = now + lease.ttl / 2

    def _signal_lock(self, key: str) -> None:
        event = self._lock_changed.pop(key, None)
        if event is not None:
            event.set()


    # ── Mode E: locks with leases ─────────────────────────────────────

    @asynccontextmanager
    async def acquire_lock(
        self,
        key: str,
        *,
        ttl_secs: int = 600,
    ) -> AsyncGenerator[None, None]:
        token = f"token-{next(self._tokens)}"
        while self._lease(key) is not None:
            await self._wait_for_lock_change(key)
            if key in self._overtaking:
                # RedisMessageBus polls for a freed lock every 0.1 s: in
                # between, a third party's SET NX may take it first.
                self._overtaking.discard(key)
                await asyncio.sleep(POLL_SECONDS)
        owner = asyncio.current_task()
        self._locks[key] = _Lease(token, self._clock() + ttl_secs, owner, ttl_secs)
        try:
            yield
        finally:
            lease = self._locks.get(key)
            if lease is not None and lease.token == token:
                if key in self._failing_releases:
                    # The release's DEL fails and RedisMessageBus swallows
                    # the error; the heartbeat stops with the holder.
                    self._failing_releases.discard(key)
                    self._stop_renewing(key, lease)
                else:
                    del self._locks[key]
                    self._signal_lock(key)

    # ── lease faults (a dropped connection at the wrong moment) ──────

    def renewal_fails(self, key: str) -> bool:
        """The heartbeat renewing ``key``'s live lease fails once, which
        ends it (agentscope's heartbeat has no error handling): the lease
        lapses under its live holder. Whether there was one to fail."""
        lease = self._locks.get(key)
        if lease is None or not self._renewing(lease):
            return False
        self._stop_renewing(key, lease)
        return True

    def waiter_overtaken(self, key: str) -> None:
        """The next waiter woken on ``key`` polls once before it retries,
        as the real bus does, so another acquirer may take the lock first.
        (A timing Redis allows, not a failure: it excuses nothing.)"""
        self._overtaking.add(key)

    def release_fails(self, key: str) -> None:
        """The next release of ``key`` fails: the lock stays until its
        lease runs out."""
        self._failing_releases.add(key)

    def _stop_renewing(self, key: str, lease: _Lease) -> None:
        """Nobody renews ``lease`` from now on: it runs out half a TTL
        later (the last renewal came half a TTL before)."""
        lease.renewed = False
        lease.expires_at = self._clock() + lease.ttl / 2
        self.faults_fired.append(key)
        self._signal_lock(key)  # waiters start counting down

    async def _wait_for_lock_change(self, key: str) -> None:
        """Block until the lock is released or its lease can expire."""
        event = self._lock_changed.setdefault(key, asyncio.Event())
        lease = self._locks[key]
        timer = None
        if not self._renewing(lease):
            delay = max(0.0, lease.expires_at - self._clock())
            loop = asyncio.get_running_loop()
            timer = loop.call_later(delay, self._signal_lock, key)
        try:
            await event.wait()
        finally:
            if timer is not None:
                timer.cancel()

    async def is_locked(self, key: str) -> bool:
        return self._lease(key) is not None

    async def try_lock(self, key: str, *, ttl_secs: int = 600) -> bool:
        if self._lease(key) is not None:
            return False
        token = f"token-{next(self._tokens)}"
        self._locks[key] = _Lease(token, self._clock() + ttl_secs, None, ttl_secs)
        return True

    async def unlock(self, key: str) -> None:
        if self._locks.pop(key, None) is not None:
            self._signal_lock(key)


    def lapsing_leases(self) -> list[float]:
        """When each lease nobody renews runs out."""
        return [lease.expires_at for lease in self._locks.values() if not self._renewing(lease)]

    def lock_holder(self, key: str) -> asyncio.Task | None | bool:
        """The task holding ``key``; ``True`` for a ``try_lock`` claim,
        ``None`` when free (an expired lease counts as free)."""
        lease = self._locks.get(key)
        if lease is None:
            return None
        if not self._renewing(lease) and lease.expires_at <= self._clock() + EXPIRY_RESOLUTION:
            return None
        return lease.owner or True

    def held_locks(self) -> list[str]:
        """Keys of every lock that is currently held."""
        return sorted(k for k in self._locks if self.lock_holder(k) is not None)

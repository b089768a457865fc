"""A message bus with Redis semantics on a virtual clock.

Implements every abstract method of agentscope's
``agentscope.app.message_bus.MessageBus``. Where agentscope's own
``InMemoryMessageBus`` ignores TTLs on locks, registries and logs, this bus
honours them the way ``RedisMessageBus`` does (``SET NX EX`` leases,
sliding ``EXPIRE`` on namespaces, queues and logs), reading time from a
:class:`~harness.kernel.clock.VirtualClock`.

Locks live in :mod:`fakes.leases`: a held lock stands for a live holder
that renews its lease (Redis' heartbeat task) until its process dies, its
heartbeat fails or its release fails.

This module holds semantics only. Switch points and the operation trace are
added around any bus by :class:`~harness.kernel.controlled_bus.ControlledBus`, so the
same interleaver can drive agentscope's own buses too. The ``peek_*``
methods, ``lock_holder``, ``process_died`` and the lease faults make it a
:class:`~harness.kernel.bus_inspector.BusInspector`.

Stands in for ``RedisMessageBus``. Where it differs: a waiter takes a freed
lock at once (the real one polls every 0.1 s, so a third party may barge
in first);
a capped log keeps exactly ``max_len`` entries (Redis trims whole stream
nodes), and a holder renews only its own lease (Redis' heartbeat renews
whatever lease is at the key). ``tests/test_bus_differential.py`` holds it
to a real server; ``docs/bus-differences.md`` lists every difference.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from agentscope.app.message_bus import MessageBus

from .leases import LeasedLocks

Clock = Callable[[], float]


@dataclass
class _Keyspace:
    """Every key of one kind, with its optional expiry."""

    values: dict = field(default_factory=dict)
    expiry: dict[str, float] = field(default_factory=dict)

    def expire(self, now: float) -> None:
        """Drop keys whose expiry has passed, as Redis does lazily."""
        for key in [k for k, t in self.expiry.items() if t <= now]:
            self.values.pop(key, None)
            self.expiry.pop(key, None)

    def touch(self, key: str, now: float, ttl_secs: int | None) -> None:
        """Refresh (slide) the key's TTL when one is given."""
        if ttl_secs is not None:
            self.expiry[key] = now + ttl_secs

    def delete(self, key: str) -> None:
        """Remove a key and its expiry."""
        self.values.pop(key, None)
        self.expiry.pop(key, None)


class VirtualRedisBus(LeasedLocks, MessageBus):  # pylint: disable=too-many-public-methods
    """In-process ``MessageBus`` with Redis TTL and lease semantics."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        #: Each stream's last entry id, (ms, sequence): the next one's base.
        self._last_ids: dict[str, tuple[int, int]] = {}
        self._tokens = itertools.count(1)
        self._queues = _Keyspace()  # key -> list[(entry_id, payload)]
        self._logs = _Keyspace()  # key -> list[(entry_id, payload)]
        self._registries = _Keyspace()  # namespace -> dict[field, value]
        #: Per channel, its subscribers' queues in the order they subscribed
        #: (a dict keeps it: what a publish reaches first never depends on
        #: memory addresses).
        self._subscribers: dict[str, dict[asyncio.Queue, None]] = {}
        self._init_locks()

    # ── housekeeping ──────────────────────────────────────────────────

    def _now(self) -> float:
        now = self._clock()
        self._queues.expire(now)
        self._logs.expire(now)
        self._registries.expire(now)
        return now

    def _entry_id(self, space: _Keyspace, key: str) -> str:
        """The id Redis' ``XADD *`` gives: ``<virtual ms>-<sequence>``, the
        sequence counting from 0 within one millisecond of one stream (a
        stream that no longer exists starts afresh). Nothing else's ids
        count, so leaving out another key's repetitions changes none."""
        ms = int(self._clock() * 1000)
        last = self._last_ids.get(key) if key in space.values else None
        ms, sequence = (last[0], last[1] + 1) if last and last[0] >= ms else (ms, 0)
        self._last_ids[key] = (ms, sequence)
        return f"{ms}-{sequence}"

    # ── Mode A: drain queue ───────────────────────────────────────────

    async def queue_push(
        self,
        key: str,
        payload: dict,
        *,
        ttl_secs: int | None = None,
    ) -> str:
        now = self._now()
        entry_id = self._entry_id(self._queues, key)
        self._queues.values.setdefault(key, []).append((entry_id, payload))
        self._queues.touch(key, now, ttl_secs)
        return entry_id

    async def queue_drain(
        self,
        key: str,
        max_count: int = 100,
    ) -> list[tuple[str, dict]]:
        self._now()
        queue = self._queues.values.get(key, [])
        taken = queue[:max_count]
        # A drained stream stays, empty, with its TTL (Redis keeps a stream
        # whose last entry is XDEL'd): a later push without a TTL expires
        # with it.
        del queue[:max_count]
        return taken

    async def queue_delete(self, key: str) -> None:
        self._queues.delete(key)

    # ── Mode C: replay log ────────────────────────────────────────────

    async def log_append(
        self,
        key: str,
        payload: dict,
        *,
        ttl_secs: int | None = None,
        max_len: int | None = None,
    ) -> str:
        now = self._now()
        entry_id = self._entry_id(self._logs, key)
        log = self._logs.values.setdefault(key, [])
        log.append((entry_id, payload))
        if max_len is not None and len(log) > max_len:
            del log[: len(log) - max_len]
        self._logs.touch(key, now, ttl_secs)
        return entry_id

    async def log_read(
        self,
        key: str,
        since: str | None = None,
        max_count: int = 100,
    ) -> list[tuple[str, dict]]:
        self._now()
        log = self._logs.values.get(key, [])
        if since is not None:
            cursor = _id_order(since)
            log = [e for e in log if _id_order(e[0]) > cursor]
        return list(log[:max_count])

    async def log_trim(self, key: str, before_id: str | None = None) -> None:
        self._now()
        if before_id is None:
            self._logs.delete(key)
            return
        cursor = _id_order(before_id)
        log = self._logs.values.get(key)
        if log is not None:
            log[:] = [e for e in log if _id_order(e[0]) >= cursor]

    # ── Mode D: transient broadcast ───────────────────────────────────

    async def publish(self, key: str, payload: dict) -> None:
        for queue in list(self._subscribers.get(key, ())):
            queue.put_nowait(payload)

    async def subscribe(
        self,
        key: str,
        *,
        on_ready: Callable[[], None] | None = None,
    ) -> AsyncGenerator[dict, None]:
        queue: asyncio.Queue = asyncio.Queue()
        self._subscribers.setdefault(key, {})[queue] = None
        try:
            if on_ready is not None:
                on_ready()
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item
        finally:
            self._subscribers.get(key, {}).pop(queue, None)

    async def aclose(self) -> None:
        for queues in self._subscribers.values():
            for queue in queues:
                queue.put_nowait(None)
        self._subscribers.clear()

    # ── Mode F: registry ──────────────────────────────────────────────

    def _namespace(self, namespace: str) -> dict[str, str]:
        self._now()
        return self._registries.values.get(namespace, {})

    def _write(self, namespace: str, ttl_secs: int | None) -> dict:
        now = self._now()
        values = self._registries.values.setdefault(namespace, {})
        self._registries.touch(namespace, now, ttl_secs)
        return values

    def _drop_if_empty(self, namespace: str) -> None:
        if not self._registries.values.get(namespace):
            self._registries.delete(namespace)

    async def registry_set(
        self,
        namespace: str,
        field: str,  # pylint: disable=redefined-outer-name
        value: str,
        *,
        ttl_secs: int | None = None,
    ) -> None:
        self._write(namespace, ttl_secs)[field] = value

    async def registry_set_if(
        self,
        namespace: str,
        field: str,  # pylint: disable=redefined-outer-name
        value: str,
        *,
        expected: str,
        ttl_secs: int | None = None,
    ) -> bool:
        if self._namespace(namespace).get(field) != expected:
            return False
        self._write(namespace, ttl_secs)[field] = value
        return True

    async def registry_pop(self, namespace: str, field: str) -> str | None:  # pylint: disable=redefined-outer-name
        value = self._namespace(namespace).pop(field, None)
        self._drop_if_empty(namespace)
        return value

    async def registry_del(self, namespace: str, field: str) -> None:  # pylint: disable=redefined-outer-name
        self._namespace(namespace).pop(field, None)
        self._drop_if_empty(namespace)

    async def registry_exists(self, namespace: str, field: str) -> bool:  # pylint: disable=redefined-outer-name
        return field in self._namespace(namespace)

    async def registry_getall(self, namespace: str) -> dict[str, str]:
        return dict(self._namespace(namespace))

    async def registry_get(self, namespace: str, field: str) -> str | None:  # pylint: disable=redefined-outer-name
        return self._namespace(namespace).get(field)

    async def registry_drop(self, namespace: str) -> None:
        self._registries.delete(namespace)

    # ── inspection for invariants (never changes state) ───────────────

    def expiries(self) -> list[float]:
        """When this bus next changes by itself: every pending TTL expiry
        and every lease nobody renews, in virtual seconds."""
        now = self._clock()
        ttls = [t for space in (self._queues, self._logs, self._registries) for t in space.expiry.values()]
        return [t for t in ttls + self.lapsing_leases() if t > now]

    def peek_queue(self, key: str) -> list[dict]:
        """Payloads queued at ``key`` that have not expired."""
        if self._queues.expiry.get(key, float("inf")) <= self._clock():
            return []
        return [payload for _, payload in self._queues.values.get(key, [])]

    def peek_registry(self, namespace: str) -> dict[str, str]:
        """A registry namespace's live fields."""
        if self._registries.expiry.get(namespace, float("inf")) <= self._clock():
            return {}
        return dict(self._registries.values.get(namespace, {}))

def _id_order(entry_id: str) -> tuple[int, int]:
    """Order stream ids numerically, as Redis does."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)

"""Switch points and the trace, wrapped around any ``MessageBus``.

:class:`ControlledBus` is itself a ``MessageBus`` (agentscope's ABC), so
agentscope receives it through its constructors like any backend. Each
operation first parks the calling task at a switch point, then delegates to
the wrapped bus (the virtual-clock fake, agentscope's ``InMemoryMessageBus``,
or a ``RedisMessageBus``), then records what happened. On the channels it is
told to, the delivery of a published message to a subscriber is a switch
point too (a subscriber that acts on a message without any bus operation of
its own would otherwise always act the moment it is published). It also keeps what
invariants need and the bus itself forgets: every event appended to a
session log (agentscope trims the log at the end of each run) and every
payload pushed to a queue.
"""
from __future__ import annotations

import asyncio
import json
import weakref
from collections import defaultdict
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

from agentscope.app.message_bus import MessageBus

from .interleaver import Interleaver, Op


def describe_payload(payload: dict) -> str:
    """A short, deterministic summary of a payload for the trace (never a
    timestamp: some agentscope releases stamp payloads with the wall
    clock)."""
    if "hint" in payload:
        return "hint " + _excerpt(str(payload["hint"]))
    kind = payload.get("type") or payload.get("kind")
    parts = [str(kind)] if kind else []
    for name in ("finished_reason", "session_id"):
        if payload.get(name) and name != "session_id":
            parts.append(f"{name}={payload[name]}")
    return " ".join(parts) or _excerpt(str(sorted(payload)))


def describe_value(value: str) -> str:
    """A registry value for the trace: JSON objects by their keys."""
    try:
        decoded = json.loads(value)
    except ValueError:
        return _excerpt(value)
    if isinstance(decoded, dict):
        return "{" + ", ".join(sorted(decoded)) + "}"
    return _excerpt(value)


def _describe_message(payload: dict) -> str:
    """A pub/sub message for the trace: its fields and values."""
    return ", ".join(f"{k}={_excerpt(str(v))}" for k, v in sorted(payload.items()))


def _excerpt(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InjectedBusFault(ConnectionError):
    """A bus operation a story made fail, as a dropped Redis connection
    would make it fail."""


class ControlledBus(MessageBus):  # pylint: disable=too-many-public-methods
    """A ``MessageBus`` whose every operation is a switch point."""

    def __init__(
        self,
        inner: MessageBus,
        interleaver: Interleaver,
        *,
        deliveries: frozenset[str] = frozenset(),
        sharing_with: "ControlledBus | None" = None,
    ) -> None:
        self.inner = inner
        self._interleaver = interleaver
        #: Channels whose deliveries are recorded in the trace.
        self.deliveries = deliveries
        self.appended: dict[str, list[dict]] = defaultdict(list)
        self.pushed: dict[str, list[dict]] = defaultdict(list)
        #: Tasks inside each lock by their own account (acquired, not
        #: yet released): two live ones at once break mutual exclusion.
        self.inside: dict[str, set] = defaultdict(set)
        self._faults: list[tuple[Op, bool]] = []
        #: Injected faults that fired, in order (armed ones may never fire).
        self.fired: list[Op] = []
        #: Tasks whose last call lost its reply to a cancel: redis-py closed
        #: that connection, so their next call connects again first.
        self._reconnecting: weakref.WeakSet = weakref.WeakSet()
        if sharing_with is not None:
            # Another process' client of the same server: one record of
            # what the server saw, and faults armed for whoever calls next.
            self.appended, self.pushed = sharing_with.appended, sharing_with.pushed
            self.inside, self._faults, self.fired = sharing_with.inside, sharing_with._faults, sharing_with.fired

    def fail_next(self, name: str, key: str, *, after: bool = False) -> None:
        """Make the next ``name`` operation on ``key`` (whoever makes it)
        raise :class:`InjectedBusFault`: instead of reaching the bus, or,
        ``after``, once the bus applied it (the reply is lost on the way
        back, as with a connection dropped mid-call). ``subscription``: the
        next message on channel ``key`` breaks its subscriber's stream."""
        self._faults.append((Op(name, key), after))

    async def _run(
        self,
        name: str,
        key: str,
        call: Callable,
        describe: Callable = lambda result: "",
    ):
        task = asyncio.current_task()
        try:
            await self._interleaver.switch_point(Op(name, key))
        except asyncio.CancelledError:
            if task in self._reconnecting:
                # A (re-armed) cancel landing while the connection its last
                # cut call closed is made again: nothing was written.
                self._interleaver.record(name, key, "CANCELLED while reconnecting (not sent)")
                raise
            # A call is one round trip: the request was written before the
            # caller first waited, so a cancel landing here loses only the
            # reply. The server still applies it.
            await call()
            self._reconnecting.add(task)
            self._interleaver.record(name, key, "APPLIED, then CANCELLED (the reply is lost)")
            raise
        self._reconnecting.discard(task)
        armed = next((f for f in self._faults if f[0] == Op(name, key)), None)
        if armed is not None:
            self._faults.remove(armed)
            self.fired.append(Op(name, key))
            if armed[1]:
                await call()
                self._interleaver.record(name, key, "APPLIED, then FAILED (injected fault)")
            else:
                self._interleaver.record(name, key, "FAILED (injected fault)")
            raise InjectedBusFault(f"injected fault: {name} {key}")
        result = await call()
        self._interleaver.record(name, key, describe(result))
        return result

    # ── Mode A ────────────────────────────────────────────────────────

    async def queue_push(self, key, payload, *, ttl_secs=None):
        async def push():
            entry_id = await self.inner.queue_push(
                key,
                payload,
                ttl_secs=ttl_secs,
            )
            self.pushed[key].append(payload)
            return entry_id

        return await self._run(
            "queue_push",
            key,
            push,
            lambda _: describe_payload(payload),
        )

    async def queue_drain(self, key, max_count=100):
        return await self._run(
            "queue_drain",
            key,
            lambda: self.inner.queue_drain(key, max_count),
            lambda entries: f"{len(entries)} entries",
        )

    async def queue_delete(self, key):
        return await self._run(
            "queue_delete",
            key,
            lambda: self.inner.queue_delete(key),
        )

    # ── Mode C ────────────────────────────────────────────────────────

    async def log_append(self, key, payload, *, ttl_secs=None, max_len=None):
        async def append():
            entry_id = await self.inner.log_append(
                key,
                payload,
                ttl_secs=ttl_secs,
                max_len=max_len,
            )
            self.appended[key].append(payload)
            return entry_id

        return await self._run(
            "log_append",
            key,
            append,
            lambda _: describe_payload(payload),
        )

    async def log_read(self, key, since=None, max_count=100):
        return await self._run(
            "log_read",
            key,
            lambda: self.inner.log_read(key, since, max_count),
            lambda entries: f"{len(entries)} entries",
        )

    async def log_trim(self, key, before_id=None):
        return await self._run(
            "log_trim",
            key,
            lambda: self.inner.log_trim(key, before_id),
        )

    # ── Mode D ────────────────────────────────────────────────────────

    async def publish(self, key, payload):
        return await self._run(
            "publish",
            key,
            lambda: self.inner.publish(key, payload),
        )

    async def subscribe(
        self,
        key: str,
        *,
        on_ready: Callable[[], None] | None = None,
    ) -> AsyncGenerator[dict, None]:
        await self._interleaver.switch_point(Op("subscribe", key))
        self._interleaver.record("subscribe", key)
        async for item in self.inner.subscribe(key, on_ready=on_ready):
            armed = (Op("subscription", key), False)
            if armed in self._faults:
                # RedisMessageBus lets every error but a timeout out of its
                # subscription: a dropped connection ends the subscriber's loop.
                self._faults.remove(armed)
                self.fired.append(armed[0])
                self._interleaver.record("receive", key, "FAILED (injected fault: the subscription drops)")
                raise InjectedBusFault(f"injected fault: subscription {key}")
            if key in self.deliveries:
                self._interleaver.record("receive", key, _describe_message(item))
            yield item

    async def aclose(self) -> None:
        await self.inner.aclose()

    # ── Mode E ────────────────────────────────────────────────────────

    @asynccontextmanager
    async def acquire_lock(self, key, *, ttl_secs=600):
        await self._interleaver.switch_point(Op("acquire_lock", key))
        async with self.inner.acquire_lock(key, ttl_secs=ttl_secs):
            self._interleaver.record("acquire_lock", key, "acquired")
            holder = asyncio.current_task()
            self.inside[key].add(holder)
            try:
                yield
            finally:
                try:
                    await self._interleaver.switch_point(Op("release_lock", key))
                finally:
                    self.inside[key].discard(holder)
                    self._interleaver.record("release_lock", key)

    async def is_locked(self, key):
        return await self._run(
            "is_locked",
            key,
            lambda: self.inner.is_locked(key),
            str,
        )

    async def try_lock(self, key, *, ttl_secs=600):
        return await self._run(
            "try_lock",
            key,
            lambda: self.inner.try_lock(key, ttl_secs=ttl_secs),
            str,
        )

    async def unlock(self, key):
        return await self._run("unlock", key, lambda: self.inner.unlock(key))

    # ── Mode F ────────────────────────────────────────────────────────

    async def registry_set(self, namespace, field, value, *, ttl_secs=None):  # pylint: disable=redefined-outer-name
        return await self._run(
            "registry_set",
            f"{namespace}#{field}",
            lambda: self.inner.registry_set(
                namespace,
                field,
                value,
                ttl_secs=ttl_secs,
            ),
            lambda _: describe_value(value),
        )

    async def registry_set_if(
        self,
        namespace,
        field,  # pylint: disable=redefined-outer-name
        value,
        *,
        expected,
        ttl_secs=None,
    ):
        return await self._run(
            "registry_set_if",
            f"{namespace}#{field}",
            lambda: self.inner.registry_set_if(
                namespace,
                field,
                value,
                expected=expected,
                ttl_secs=ttl_secs,
            ),
            str,
        )

    async def registry_pop(self, namespace, field):  # pylint: disable=redefined-outer-name
        return await self._run(
            "registry_pop",
            f"{namespace}#{field}",
            lambda: self.inner.registry_pop(namespace, field),
            str,
        )

    async def registry_del(self, namespace, field):  # pylint: disable=redefined-outer-name
        return await self._run(
            "registry_del",
            f"{namespace}#{field}",
            lambda: self.inner.registry_del(namespace, field),
        )

    async def registry_exists(self, namespace, field):  # pylint: disable=redefined-outer-name
        return await self._run(
            "registry_exists",
            f"{namespace}#{field}",
            lambda: self.inner.registry_exists(namespace, field),
            str,
        )

    async def registry_getall(self, namespace):
        return await self._run(
            "registry_getall",
            namespace,
            lambda: self.inner.registry_getall(namespace),
            lambda values: f"{len(values)} fields",
        )

    async def registry_get(self, namespace, field):  # pylint: disable=redefined-outer-name
        return await self._run(
            "registry_get",
            f"{namespace}#{field}",
            lambda: self.inner.registry_get(namespace, field),
            str,
        )

    async def registry_drop(self, namespace):
        return await self._run(
            "registry_drop",
            namespace,
            lambda: self.inner.registry_drop(namespace),
        )

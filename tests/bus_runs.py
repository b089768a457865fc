"""The buses a program runs on, for the differential bus test
(``test_bus_differential.py``): each wrapped with what it knows by name
(its entry ids, lock holders, subscribers) and with its own way of letting
virtual time pass."""
from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from agentscope.app.message_bus import MessageBus, RedisMessageBus

from bus_programs import Call, Step
from fakes.bus import VirtualRedisBus
from harness.kernel.clock import VirtualClock
from harness.kernel.redis_server import shorten_ttls

#: Wall-clock patience for what travels through the server.
REDIS_TAKES_LOCK_WITHIN = 1.0
REDIS_GIVES_UP_AFTER = 0.15  # its first try and one 0.1 s retry
DELIVERY_WITHIN = 5.0


@dataclass
class Holder:
    """A task inside ``acquire_lock`` until told to leave."""

    key: str
    task: asyncio.Task
    leave: asyncio.Event


@dataclass
class Subscriber:
    """A task reading a subscription into ``received``."""

    channel: str
    task: asyncio.Task
    received: list[dict]
    arrived: asyncio.Event
    seen: int = 0


class Backend:
    """One bus under test: its entry ids by the name of the step that
    made them, its lock holders and its subscribers. Time passing reaches
    nothing here (agentscope's in-memory bus reads no virtual clock)."""

    def __init__(self, bus: MessageBus) -> None:
        self.bus = bus
        self.entry_names: dict[tuple[str, str], str] = {}
        self.entry_ids: dict[str, str] = {}
        self.holders: dict[str, Holder] = {}
        self.subscribers: dict[str, Subscriber] = {}

    # entries

    def named(self, key: str, name: str, entry_id: str) -> str:
        self.entry_names[key, entry_id] = name
        self.entry_ids[name] = entry_id
        return name

    def names_of(self, key: str, entries: list[tuple[str, dict]]) -> list:
        return [(self.entry_names.get((key, i), f"unknown id {i}"), p) for i, p in entries]

    def entry_id(self, name: str | None) -> str | None:
        return None if name is None else self.entry_ids[name]

    # time

    async def pass_time(self, seconds: float) -> None:
        """Nothing: this bus reads no virtual clock."""

    # locks

    async def acquire(self, key: str, ttl: int, name: str, fake_took: bool) -> str:
        inside, leave = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            async with self.bus.acquire_lock(key, ttl_secs=ttl):
                inside.set()
                await leave.wait()

        task = asyncio.create_task(hold(), name=name)
        if await self.got_inside(inside, fake_took):
            self.holders[name] = Holder(key, task, leave)
            await self.entered(name, key, ttl)
            return "took it"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return "gave up"

    async def got_inside(self, inside: asyncio.Event, fake_took: bool) -> bool:
        """In-process buses take a free lock within a few loop turns."""
        for _ in range(20):
            if inside.is_set():
                return True
            await asyncio.sleep(0)
        return inside.is_set()

    async def entered(self, name: str, key: str, ttl: int) -> None:
        """A holder is inside (the Redis bus starts its heartbeat)."""

    async def release(self, name: str | None) -> None:
        holder = self.holders.pop(name, None) if name else None
        if holder is not None:
            holder.leave.set()
            await asyncio.wait_for(holder.task, DELIVERY_WITHIN)
            self.left(name)

    def left(self, name: str) -> None:
        """A holder left (its heartbeat stops)."""

    async def unlock(self, key: str) -> None:
        await self.bus.unlock(key)

    # pub/sub

    async def subscribe(self, channel: str, name: str) -> None:
        received: list[dict] = []
        arrived, ready = asyncio.Event(), asyncio.Event()

        async def listen() -> None:
            async for payload in self.bus.subscribe(channel, on_ready=ready.set):
                received.append(payload)
                arrived.set()

        task = asyncio.create_task(listen(), name=name)
        await asyncio.wait_for(ready.wait(), DELIVERY_WITHIN)
        self.subscribers[name] = Subscriber(channel, task, received, arrived)

    async def receive(self, name: str | None, index: int):
        """What the subscriber got since it was last asked: a marker is
        published after it, and everything before the marker counts."""
        if name is None:
            return None
        sub = self.subscribers[name]
        marker = {"marker": index}
        await self.bus.publish(sub.channel, marker)

        async def until_marked() -> None:
            while marker not in sub.received[sub.seen:]:
                sub.arrived.clear()
                await sub.arrived.wait()

        try:
            await asyncio.wait_for(until_marked(), DELIVERY_WITHIN)
        except TimeoutError:
            return f"the marker never arrived (within {DELIVERY_WITHIN} s)"
        end = sub.received.index(marker, sub.seen)
        got = [p for p in sub.received[sub.seen:end] if "marker" not in p]
        sub.seen = end + 1
        return got

    async def close(self) -> None:
        for name in list(self.holders):
            await self.release(name)
        for sub in self.subscribers.values():
            sub.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sub.task
        await self.bus.aclose()


class FakeBackend(Backend):
    """The fake on a virtual clock that time passing advances."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        super().__init__(VirtualRedisBus(self.clock.now))

    async def pass_time(self, seconds: float) -> None:
        self.clock.advance_by(seconds)


@dataclass
class Beat:
    """agentscope's lock heartbeat, played on virtual time: every
    ``max(1, ttl / 2)`` seconds it sets ``key``'s TTL back to ``ttl``."""

    key: str
    ttl: int
    token: str
    due: float


def heartbeat_period(ttl: int) -> float:
    """How often agentscope's Redis bus renews a held lock."""
    return max(1.0, ttl / 2)


class RedisBackend(Backend):
    """agentscope's Redis bus on the real server. Time passing shortens
    every TTL on the server; the heartbeats of the holders inside a lock
    (asyncio sleeps on the wall clock, so they never fire in a test) fire
    at their virtual instants in between."""

    def __init__(self, bus: RedisMessageBus) -> None:
        super().__init__(bus)
        self.client = bus.get_client()
        self.now = 0.0
        self.wall_synced = time.monotonic()
        self.beats: dict[str, Beat] = {}
        #: Lock keys whose lease a heartbeat renewed although its holder
        #: no longer owned it (see :func:`known_difference`).
        self.foreign_renewals: set[str] = set()

    async def perform_on_still_clock(self, call: Call, fake_outcome):
        """The call, with the server's clock held still around it: every
        TTL first gets back the wall time since the last call ended (no
        virtual time passes between steps), and a lock given up on (0.15 s,
        and no TTL changed) is given back whole with the next call. What
        the server still counts is a few milliseconds a call, in the
        direction of expiry, against whole seconds between deadlines."""
        started = time.monotonic()
        await shorten_ttls(self.client, -(started - self.wall_synced))
        self.wall_synced = started
        outcome = await perform(self, call, fake_outcome)
        if outcome != "gave up":
            self.wall_synced = time.monotonic()
        return outcome

    async def pass_time(self, seconds: float) -> None:
        end = self.now + seconds
        while self.beats:
            beat = min(self.beats.values(), key=lambda b: b.due)
            if beat.due > end:
                break
            await self._elapse(beat.due - self.now)
            await self._beat(beat)
        await self._elapse(end - self.now)

    async def _elapse(self, seconds: float) -> None:
        if seconds > 0:
            await shorten_ttls(self.client, seconds)
        self.now += seconds

    async def _beat(self, beat: Beat) -> None:
        """``EXPIRE key ttl``, as agentscope's heartbeat does, whoever's
        lease is at the key now."""
        value = await self.client.get(beat.key)
        if value is not None and value not in {b.token for b in self.beats.values()}:
            self.foreign_renewals.add(beat.key)
        await self.client.expire(beat.key, beat.ttl)
        beat.due += heartbeat_period(beat.ttl)

    async def got_inside(self, inside: asyncio.Event, fake_took: bool) -> bool:
        """A free lock is one ``SET NX`` away; a taken one is retried every
        0.1 s: given a while when the fake took it, two retries when not."""
        patience = REDIS_TAKES_LOCK_WITHIN if fake_took else REDIS_GIVES_UP_AFTER
        try:
            await asyncio.wait_for(inside.wait(), patience)
        except TimeoutError:
            return False
        return True

    async def entered(self, name: str, key: str, ttl: int) -> None:
        token = await self.client.get(key)
        self.beats[name] = Beat(key, ttl, token, self.now + heartbeat_period(ttl))

    def left(self, name: str) -> None:
        self.beats.pop(name, None)

    async def unlock(self, key: str) -> None:
        await super().unlock(key)
        self.foreign_renewals.discard(key)


async def perform(run: Backend, call: Call, fake_outcome=None):
    """One call on one bus; entry ids come back as the names of the steps
    that made the entries."""
    bus, s, key = run.bus, call.step, call.key
    match s.op:
        case "try_lock":
            return await bus.try_lock(key, ttl_secs=s.ttl)
        case "unlock":
            return await run.unlock(key)
        case "is_locked":
            return await bus.is_locked(key)
        case "acquire_lock":
            return await run.acquire(key, s.ttl, call.name, fake_outcome == "took it")
        case "release_lock":
            return await run.release(call.name)
        case "queue_push":
            return run.named(key, call.name, await bus.queue_push(key, _payload(call), ttl_secs=s.ttl))
        case "queue_drain":
            return run.names_of(key, await bus.queue_drain(key, s.max_count))
        case "queue_delete":
            return await bus.queue_delete(key)
        case "log_append":
            entry_id = await bus.log_append(key, _payload(call), ttl_secs=s.ttl, max_len=s.max_len)
            return run.named(key, call.name, entry_id)
        case "log_read":
            return run.names_of(key, await bus.log_read(key, run.entry_id(call.cursor), s.max_count))
        case "log_trim":
            return await bus.log_trim(key, run.entry_id(call.cursor))
        case "subscribe":
            return await run.subscribe(key, call.name)
        case "publish":
            return await bus.publish(key, _payload(call))
        case "receive":
            return await run.receive(call.name, call.index)
        case "pass_time":
            return await run.pass_time(s.seconds)
    return await _registry(bus, s)


async def _registry(bus: MessageBus, s: Step):
    match s.op:
        case "registry_set":
            return await bus.registry_set(s.key, s.field, s.value, ttl_secs=s.ttl)
        case "registry_set_if":
            return await bus.registry_set_if(
                s.key, s.field, s.value, expected=s.expected, ttl_secs=s.ttl,
            )
        case "registry_getall" | "registry_drop":
            return await getattr(bus, s.op)(s.key)
    return await getattr(bus, s.op)(s.key, s.field)


def _payload(call: Call) -> dict:
    return {"n": call.index}

"""A real redis-server under the interleaver: waiting for it, and its clock.

agentscope's ``RedisMessageBus`` accepts a connection pool; the harness
hands it one whose connections are :class:`LinkedConnection`, so every
byte agentscope sends or reads passes through code that tells the
interleaver what is on its way. Nothing of agentscope is replaced: the
bus, its Lua scripts, its lock loop and heartbeat, its subscription loop
all run as written, against the real server.

What the link adds, and why:

- **Quiet means quiet.** A command whose reply has not come back is
  outside work (:meth:`Interleaver.outside_work_started`): the loop has no
  callback ready, yet the world is not at rest. So is a published message
  on its way to a subscriber that is waiting for it: ``PUBLISH`` answers
  how many subscribers got it, and the link waits for exactly those.
- **Deliveries in one order.** Subscribers waiting for a message take it
  in the order their connections were made, and the publisher hears its
  reply after them; the OS would otherwise choose, run by run.
- **A poll is one wait.** The subscription loop polls with a one-second
  timeout and polls again when it expires; on virtual time that timer would
  keep the world from ever settling. A poll here waits until a message
  comes, which is what the loop of polls amounts to.
- **Keys expire on virtual time** (:meth:`RedisLink.follow_clock`,
  :mod:`.redis_expiry`): each TTL agentscope gives is taken over just
  after its command (and bounded by a call just before it) as the TTL the
  command's arguments name, the server never ends a key itself, and a key
  ends when virtual time reaches its deadline. The wall clock, however
  slow a loaded machine makes it, never decides when a key ends, nor
  which TTL it had.
- **Faults where Redis has them:** the next command of a name on a key can
  fail before the server gets it (:meth:`RedisLink.fail_next`).
- **A dead process' connections freeze**, and the server drops them
  (:meth:`RedisLink.freeze`).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict, deque
from typing import Any

import redis
import redis.asyncio as aioredis

from .interleaver import Interleaver
from .redis_connection import LinkedConnection
from .redis_expiry import VirtualExpiry

class InjectedRedisFault(redis.ConnectionError):
    """A command a story made fail before the server got it, as a dropped
    connection would."""


class LinkOutOfStep(AssertionError):
    """What the server says disagrees with the link's own count (a
    subscriber it does not know of): waiting for it could hang."""


class _Delivery:
    """One published message on its way to the subscribers waiting for it
    (by connection index); each that has it waits on its turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.waiting: set[int] = set()
        self.arrived: dict[int, asyncio.Future] = {}
        self.replied = loop.create_future()

    def release_if_complete(self) -> None:
        """Once every awaited subscriber has the message: they go on in
        connection order, then the publisher."""
        if self.replied.done() or self.waiting - set(self.arrived):
            return
        for _, turn in sorted(self.arrived.items()):
            if not turn.done():
                turn.set_result(None)
        self.replied.set_result(None)


class RedisLink:
    """Everything between one world and a real redis-server."""

    def __init__(
        self,
        host: str,
        port: int,
        interleaver: Interleaver,
        sync_client: redis.Redis,
    ) -> None:
        self.host = host
        self.port = port
        self.interleaver = interleaver
        self.sync = sync_client
        self.expiry = VirtualExpiry(sync_client)
        self._connections: list[LinkedConnection] = []
        self._channels: dict[int, set[str]] = defaultdict(set)
        #: Messages (and subscribe confirmations) each connection is owed.
        self._owed: dict[int, int] = defaultdict(int)
        self._reading: set[int] = set()
        self._deliveries: dict[int, deque[_Delivery]] = defaultdict(deque)
        #: Turns of messages read before their ``PUBLISH`` was answered.
        self._early: dict[int, deque[asyncio.Future]] = defaultdict(deque)
        self._busy = 0
        self._frozen: set[int] = set()
        self._dead_owners: set[int] = set()
        self._armed: list[tuple[str, str]] = []
        #: ``(command, key)`` of each injected fault that fired.
        self.fired: list[tuple[str, str]] = []
        self.pools: list[aioredis.ConnectionPool] = []

    # ── the pool agentscope gets ──────────────────────────────────────

    def pool(self, owner: int) -> aioredis.ConnectionPool:
        """A connection pool for process ``owner``'s ``RedisMessageBus``."""
        pool = aioredis.ConnectionPool(
            connection_class=LinkedConnection,
            link=self,
            owner=owner,
            host=self.host,
            port=self.port,
            decode_responses=True,
            # No read or connect timeouts: a reply comes back within one
            # quiet period, and a timer for it would be a virtual one
            # (redis-py >= 6 sets 5 s) that keeps the world from settling.
            socket_timeout=None,
            socket_connect_timeout=None,
        )
        self.pools.append(pool)
        return pool

    def joined(self, connection: LinkedConnection) -> int:
        self._connections.append(connection)
        return len(self._connections)

    # ── outside work ──────────────────────────────────────────────────

    def _started(self) -> None:
        self._busy += 1
        self.interleaver.outside_work_started()

    def _finished(self) -> None:
        self._busy -= 1
        self.interleaver.outside_work_finished()

    async def round_trip(self, call):
        """A command's reply, counted as outside work until it is back."""
        self._started()
        try:
            return await call()
        finally:
            self._finished()

    # ── what a connection tells the link ──────────────────────────────

    def sending(self, connection: LinkedConnection, args: tuple) -> None:
        """``connection`` is about to send ``args``: a fault armed on it
        fires here, and subscriptions are noted."""
        name = str(args[0]).upper() if args else ""
        key = str(args[1]) if len(args) > 1 else ""
        if (name, key) in self._armed:
            self._armed.remove((name, key))
            self.fired.append((name, key))
            raise InjectedRedisFault(f"injected fault: {name} {key}")
        if name == "SUBSCRIBE":
            for channel in args[1:]:
                self._channels[connection.index].add(str(channel))
                self._owed[connection.index] += 1
        elif name == "UNSUBSCRIBE":
            for channel in args[1:]:
                self._channels[connection.index].discard(str(channel))

    def published(self, channel: str, receivers: int) -> _Delivery | None:
        """``PUBLISH`` reached ``receivers`` subscribers: each is owed the
        message, and those waiting for one (or holding it already) are a
        delivery the publisher waits for."""
        targets = [c for c in self._connections if channel in self._channels[c.index]]
        if len(targets) != receivers:
            raise LinkOutOfStep(
                f"PUBLISH {channel} reached {receivers} subscribers; "
                f"the link knows of {len(targets)}",
            )
        delivery = _Delivery(self.interleaver.loop)
        for target in targets:
            index = target.index
            if self._early[index]:
                delivery.waiting.add(index)
                delivery.arrived[index] = self._early[index].popleft()
            elif index in self._reading:
                delivery.waiting.add(index)
                self._deliveries[index].append(delivery)
            self._owe(index, 1)
        if not delivery.waiting:
            return None
        delivery.release_if_complete()
        return delivery

    def _owe(self, index: int, count: int) -> None:
        with self._waiting_changes(index):
            self._owed[index] += count

    def reading(self, connection: LinkedConnection, reading: bool) -> None:
        """A subscriber starts or stops waiting for a message: while it
        is owed one, its wait is outside work."""
        with self._waiting_changes(connection.index):
            if reading:
                self._reading.add(connection.index)
            else:
                self._reading.discard(connection.index)

    @contextlib.contextmanager
    def _waiting_changes(self, index: int):
        """Connection ``index``'s wait counts as outside work while it
        reads and is owed a message: start or finish that count as the
        block changes either."""
        def waits() -> bool:
            return index in self._reading and self._owed[index] > 0

        before = waits()
        yield
        after = waits()
        if after and not before:
            self._started()
        elif before and not after:
            self._finished()

    async def took(self, connection: LinkedConnection, response: Any) -> None:
        """``connection``'s subscriber read ``response``. A message waits
        here until every subscriber its delivery waits for has it (and the
        publisher's reply is in); then they go on in connection order, and
        the publisher after them."""
        kind = response[0] if isinstance(response, (list, tuple)) and response else None
        if kind not in ("message", "subscribe"):
            return
        index = connection.index
        self._owe(index, -1)
        if kind != "message":
            return
        turn = self.interleaver.loop.create_future()
        if self._deliveries[index]:
            delivery = self._deliveries[index].popleft()
            delivery.arrived[index] = turn
            delivery.release_if_complete()
        elif self._owed[index] < 0:  # here before its PUBLISH's reply
            self._early[index].append(turn)
        else:  # owed since before it started reading: nobody waits
            return
        await turn

    def closed(self, connection: LinkedConnection) -> None:
        """``connection`` closed: the server dropped its subscriptions and
        what was on its way to it."""
        index = connection.index
        self.reading(connection, False)
        self._owed[index] = 0
        self._channels[index].clear()
        for delivery in self._deliveries.pop(index, deque()):
            delivery.waiting.discard(index)
            delivery.release_if_complete()

    # ── faults and deaths ─────────────────────────────────────────────

    def fail_next(self, command: str, key: str) -> None:
        """The next ``command`` on ``key``, from any connection, fails
        before the server gets it."""
        self._armed.append((command.upper(), key))

    def freeze(self, owner: int) -> None:
        """Process ``owner`` died: its connections, and any it would open
        later (a timer of its own waking), never move again, and the
        server drops them (and their subscriptions)."""
        self._dead_owners.add(owner)
        for connection in self._connections:
            if connection.owner == owner and connection.index not in self._frozen:
                self._frozen.add(connection.index)
                connection.abort()
                self.closed(connection)

    def is_frozen(self, connection: LinkedConnection) -> bool:
        return connection.index in self._frozen or connection.owner in self._dead_owners

    # ── time ──────────────────────────────────────────────────────────

    def follow_clock(self, seconds: float = 0.0) -> None:
        """``seconds`` of virtual time passed: keys whose deadline it
        reaches end (none: only take over the TTLs given since the last
        call; a connection calls that around each command that can give
        one). Synchronous: it runs between loop iterations or inside one
        connection's call, when nothing else talks to the server."""
        self.expiry.follow(seconds)

    # ── what the harness reads ────────────────────────────────────────

    def queue(self, key: str) -> list[dict]:
        """The payloads queued at ``key`` (agentscope's stream encoding)."""
        entries = self.sync.xrange(key)
        return [json.loads(fields["payload"]) for _, fields in entries if "payload" in fields]

    def registry(self, namespace: str) -> dict[str, str]:
        return self.sync.hgetall(namespace)

    def value(self, key: str) -> str | None:
        return self.sync.get(key)

    def flush(self) -> None:
        """Empty the server for the next story."""
        self.sync.flushall()

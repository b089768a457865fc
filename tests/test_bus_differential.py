"""The fake bus against agentscope's two buses, the Redis one on a real
redis-server, through the same programs.

Hypothesis draws a short program of bus operations (locks with leases,
queues, logs, registries with TTLs, pub/sub, virtual time passing:
``bus_programs.py``). Each step runs on (``bus_runs.py``)

- **fake**: :class:`fakes.bus.VirtualRedisBus` on a :class:`VirtualClock`
  (time passing advances the clock);
- **redis**: agentscope's ``RedisMessageBus`` on this process' server
  (time passing shortens every TTL, :func:`shorten_ttls`; the lock
  heartbeat, which sleeps on the wall clock, is played on virtual time);
- **in-memory**: agentscope's ``InMemoryMessageBus`` (time passing reaches
  nothing: it has no virtual clock).

Results are compared after every step, entry ids normalised (each bus's
id becomes the name of the step that made the entry). The fake and redis
must agree. In-memory must do what ``docs/bus-differences.md`` says it
does: what the fake does on a clock that never moves (it ignores TTLs),
and for locks what :class:`InMemoryLocks` says. Every known difference is
one named rule here, one row there, and one story every run plays.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from agentscope.app.message_bus import InMemoryMessageBus, RedisMessageBus
from hypothesis import HealthCheck, example, given, settings

from bus_programs import CHANNELS, LOCKS, LOGS, NAMESPACES, QUEUES, Call, Plan, Step, programs, step
from bus_runs import Backend, FakeBackend, RedisBackend, perform
from fakes.bus import VirtualRedisBus
from harness.kernel.clock import VirtualClock
from harness.kernel.redis_server import RedisServer

#: Wall-clock seconds one program may take on the three buses (a few
#: hundred milliseconds is usual): a hang fails instead of stalling.
PROGRAM_WITHIN = 60.0

# ── the known differences ─────────────────────────────────────────────

LOCK_OPS = ("try_lock", "unlock", "is_locked", "acquire_lock", "release_lock")


class InMemoryLocks:
    """What ``InMemoryMessageBus``'s locks do (read from its source):
    ``try_lock``, ``unlock`` and ``is_locked`` share one table of holders;
    ``acquire_lock`` waits on an ``asyncio.Lock`` of its own, not on that
    table, writes the key into the table when it enters and removes it
    when it leaves, whoever holds it by then; no TTL is ever read."""

    def __init__(self) -> None:
        self.table: set[str] = set()
        self.inside: dict[str, str] = {}  # lock key -> holder in its asyncio.Lock

    def outcome(self, call: Call):
        """What the in-memory bus answers to a lock call."""
        key = call.key
        match call.step.op:
            case "try_lock":
                taken = key not in self.table
                self.table.add(key)
                return taken
            case "unlock":
                self.table.discard(key)
                return None
            case "is_locked":
                return key in self.table
            case "acquire_lock":
                if key in self.inside:
                    return "gave up"
                self.inside[key] = call.name
                self.table.add(key)
                return "took it"
        if call.name is not None and self.inside.get(key) == call.name:
            del self.inside[key]
            self.table.discard(key)
        return None


def redis_kept_older_entries(call: Call, fake: list, redis: list) -> bool:
    """Known difference of the fake: ``XADD MAXLEN ~ n`` trims only whole
    stream nodes (100 entries by default), so Redis keeps entries the fake
    (exactly capped) dropped. Holds when Redis' read is some entries older
    than everything the fake returned, then the fake's read, cut at
    ``max_count``."""
    kept = set(map(repr, fake))
    older = [entry for entry in redis if repr(entry) not in kept]
    if redis[: len(older)] != older:
        return False
    if fake and older and max(_index(e) for e in older) >= _index(fake[0]):
        return False
    rest = redis[len(older):]
    return rest == fake[: len(rest)] and len(redis) == min(
        call.step.max_count, len(older) + len(fake),
    )


def _index(entry: tuple[str, dict]) -> int:
    return entry[1]["n"]


def known_difference(call: Call, plan: Plan, redis: RedisBackend, fake, redis_out) -> str | None:
    """Why the fake and Redis may disagree on this call, or ``None`` when
    they must not (each reason is a row of docs/bus-differences.md)."""
    op = call.step.op
    if op == "log_read" and plan.capped(call) and redis_kept_older_entries(call, fake, redis_out):
        return "approximate MAXLEN: Redis keeps older entries"
    if op in ("try_lock", "is_locked", "acquire_lock") and call.key in redis.foreign_renewals:
        return "a heartbeat renewed a lease its holder no longer owned"
    return None


# ── one program on every bus ──────────────────────────────────────────


@dataclass
class Row:
    """One call and what each bus answered."""

    call: Call
    fake: object
    redis: object
    memory: object
    memory_expected: object = None
    note: str = ""

    def __str__(self) -> str:
        line = (
            f"{self.call.index:>2} {self.call}: fake={self.fake!r} "
            f"redis={self.redis!r} in-memory={self.memory!r}"
        )
        if self.memory != self.memory_expected:
            line += f" (in-memory expected {self.memory_expected!r})"
        notes = [self.note] if self.note else []
        if self.memory == self.memory_expected != self.fake:
            lock = self.call.step.op in LOCK_OPS
            notes.append("in-memory: " + ("InMemoryLocks" if lock else "no TTLs"))
        return line + "".join(f"  [known: {note}]" for note in notes)


class Disagreement(AssertionError):
    """Two buses answered a call differently, and no known difference
    explains it."""


async def play(program: list[Step], server: RedisServer) -> list[Row]:
    """Every step on every bus, compared as it goes."""
    fake, still = FakeBackend(), Backend(VirtualRedisBus(VirtualClock().now))
    memory, locks = Backend(InMemoryMessageBus()), InMemoryLocks()
    redis = RedisBackend(await RedisMessageBus(server.host, server.port).__aenter__())
    plan, rows = Plan(), []
    try:
        for index, drawn in enumerate(program):
            call = plan.call(index, drawn)
            row = Row(call, *await _answers(call, fake, redis, memory))
            row.memory_expected = (
                locks.outcome(call) if drawn.op in LOCK_OPS else await perform(still, call)
            )
            rows.append(row)
            if row.fake != row.redis:
                row.note = known_difference(call, plan, redis, row.fake, row.redis) or ""
                if not row.note:
                    raise Disagreement(_story("the fake and Redis disagree", rows))
            if row.memory != row.memory_expected:
                raise Disagreement(_story("in-memory did not do what it is known to do", rows))
            plan.after(call)
    finally:
        for run in (fake, still, memory, redis):
            await run.close()
    return rows


async def _answers(call: Call, fake: Backend, redis: RedisBackend, memory: Backend) -> tuple:
    fake_out = await perform(fake, call)
    redis_out = await redis.perform_on_still_clock(call, fake_out)
    return fake_out, redis_out, await perform(memory, call)


def _story(headline: str, rows: list[Row]) -> str:
    return headline + " at the last call:\n" + "\n".join(map(str, rows))


# ── the stories every run plays (each known difference, at least once) ─

_LOCK, _QUEUE, _LOG, _NS = LOCKS[0], QUEUES[0], LOGS[0], NAMESPACES[0]
STORIES = {
    "in-memory ignores TTLs": [
        step("try_lock", _LOCK, ttl=5),
        step("registry_set", _NS, field="f", value="v1", ttl=5),
        step("log_append", _LOG, ttl=5, max_len=None),
        step("queue_push", _QUEUE, ttl=5),
        step("pass_time", seconds=5),
        step("is_locked", _LOCK),
        step("registry_getall", _NS),
        step("log_read", _LOG, since=None, max_count=100),
        step("queue_drain", _QUEUE, max_count=100),
    ],
    "in-memory acquire_lock does not see a try_lock claim": [
        step("try_lock", _LOCK, ttl=5),
        step("acquire_lock", _LOCK, ttl=10),
        step("release_lock", holder=0),
        step("is_locked", _LOCK),
    ],
    "in-memory acquire_lock clears another's claim as it leaves": [
        step("acquire_lock", _LOCK, ttl=10),
        step("unlock", _LOCK),
        step("try_lock", _LOCK, ttl=5),
        step("release_lock", holder=0),
        step("is_locked", _LOCK),
    ],
    "in-memory acquire_lock waits for a holder unlock() did not stop": [
        step("acquire_lock", _LOCK, ttl=10),
        step("unlock", _LOCK),
        step("acquire_lock", _LOCK, ttl=10),
        step("is_locked", _LOCK),
    ],
    "a held lock outlives its TTL": [
        step("acquire_lock", _LOCK, ttl=10),
        step("pass_time", seconds=25),
        step("is_locked", _LOCK),
        step("release_lock", holder=0),
        step("is_locked", _LOCK),
    ],
    "Redis' heartbeat renews a lease its holder lost": [
        step("acquire_lock", _LOCK, ttl=10),
        step("unlock", _LOCK),
        step("try_lock", _LOCK, ttl=30),
        step("pass_time", seconds=25),
        step("pass_time", seconds=10),
        step("is_locked", _LOCK),
        step("release_lock", holder=0),
        step("is_locked", _LOCK),
    ],
    "Redis trims a capped log approximately": [
        *[step("log_append", _LOG, ttl=None, max_len=1)] * 3,
        step("log_read", _LOG, since=None, max_count=2),
        step("log_read", _LOG, since=0, max_count=100),
    ],
    "a drained queue keeps its TTL": [
        step("queue_push", _QUEUE, ttl=5),
        step("queue_drain", _QUEUE, max_count=100),
        step("queue_push", _QUEUE, ttl=None),
        step("pass_time", seconds=5),
        step("queue_drain", _QUEUE, max_count=100),
    ],
    "a subscriber hears its channel from when it subscribed": [
        step("subscribe", CHANNELS[0]),
        step("publish", CHANNELS[0]),
        step("subscribe", CHANNELS[0]),
        step("subscribe", CHANNELS[1]),
        step("publish", CHANNELS[0]),
        step("receive", subscriber=0),
        step("receive", subscriber=1),
        step("receive", subscriber=2),
    ],
}


def playing_every_story(test):
    """The test, with every story of :data:`STORIES` as an explicit
    example."""
    for program in STORIES.values():
        test = example(program)(test)
    return test


# ── the test ──────────────────────────────────────────────────────────


def test_the_fake_redis_and_in_memory_buses_agree(redis_server):
    server = redis_server()

    @settings(
        max_examples=100,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(programs())
    @playing_every_story
    def agree(program: list[Step]) -> None:
        server.flush()  # each program starts on an empty server
        asyncio.run(asyncio.wait_for(play(program, server), PROGRAM_WITHIN))

    agree()

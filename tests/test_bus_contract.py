"""The fake bus keeps agentscope's ``MessageBus`` contract.

Every contract test runs against agentscope's own ``InMemoryMessageBus`` and
against :class:`fakes.bus.VirtualRedisBus`: if the fake ever drifts from the
reference implementation, the same test fails on one side only. The TTL and
lease tests at the bottom are what the fake adds (Redis semantics that the
in-memory bus ignores).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.app.message_bus import InMemoryMessageBus, MessageBus

from fakes.bus import VirtualRedisBus
from harness.kernel.clock import VirtualClock
from harness.kernel.event_loop import VirtualTimeEventLoop
from harness.kernel.interleaver import Interleaver


@pytest.fixture(params=["agentscope-in-memory", "virtual-redis"])
def bus(request) -> MessageBus:
    if request.param == "agentscope-in-memory":
        return InMemoryMessageBus()
    return VirtualRedisBus(VirtualClock().now)


# ── Mode A: drain queue ───────────────────────────────────────────────


@pytest.mark.asyncio
async def test_queue_drains_in_arrival_order_and_only_once(bus):
    for n in range(5):
        await bus.queue_push("q", {"n": n})
    first = await bus.queue_drain("q", max_count=3)
    rest = await bus.queue_drain("q")
    assert [p["n"] for _, p in first] == [0, 1, 2]
    assert [p["n"] for _, p in rest] == [3, 4]
    assert await bus.queue_drain("q") == []


@pytest.mark.asyncio
async def test_queue_delete_drops_entries_and_is_idempotent(bus):
    await bus.queue_push("q", {"n": 1})
    await bus.queue_delete("q")
    await bus.queue_delete("q")
    assert await bus.queue_drain("q") == []


@pytest.mark.asyncio
async def test_queue_entry_ids_are_distinct(bus):
    ids = {await bus.queue_push("q", {"n": n}) for n in range(10)}
    assert len(ids) == 10


# ── Mode C: replay log ────────────────────────────────────────────────


@pytest.mark.asyncio
async def test_log_reads_are_non_destructive_and_cursor_based(bus):
    ids = [await bus.log_append("log", {"n": n}) for n in range(12)]
    assert [p["n"] for _, p in await bus.log_read("log")] == list(range(12))
    after = await bus.log_read("log", since=ids[9])
    assert [p["n"] for _, p in after] == [10, 11]
    assert await bus.log_read("log", since=ids[-1]) == []


@pytest.mark.asyncio
async def test_log_trim_before_id_and_whole(bus):
    ids = [await bus.log_append("log", {"n": n}) for n in range(4)]
    await bus.log_trim("log", before_id=ids[2])
    assert [p["n"] for _, p in await bus.log_read("log")] == [2, 3]
    await bus.log_trim("log")
    assert await bus.log_read("log") == []


@pytest.mark.asyncio
async def test_log_max_len_keeps_newest(bus):
    for n in range(6):
        await bus.log_append("log", {"n": n}, max_len=3)
    assert [p["n"] for _, p in await bus.log_read("log")] == [3, 4, 5]


# ── Mode D: broadcast ─────────────────────────────────────────────────


@pytest.mark.asyncio
async def test_publish_reaches_only_live_subscribers(bus):
    await bus.publish("chan", {"n": 0})  # nobody listening: lost
    ready = asyncio.Event()
    received: list[dict] = []

    async def listen():
        async for item in bus.subscribe("chan", on_ready=ready.set):
            received.append(item)
            if len(received) == 2:
                return

    listener = asyncio.create_task(listen())
    await ready.wait()
    await bus.publish("chan", {"n": 1})
    await bus.publish("chan", {"n": 2})
    await asyncio.wait_for(listener, 1)
    assert received == [{"n": 1}, {"n": 2}]


# ── Mode E: locks ─────────────────────────────────────────────────────


@pytest.mark.asyncio
async def test_acquire_lock_is_mutually_exclusive(bus):
    order: list[str] = []

    async def hold(name: str):
        async with bus.acquire_lock("lock"):
            order.append(f"{name}-in")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append(f"{name}-out")

    await asyncio.gather(hold("a"), hold("b"))
    assert order == ["a-in", "a-out", "b-in", "b-out"]
    assert not await bus.is_locked("lock")


@pytest.mark.asyncio
async def test_is_locked_while_held(bus):
    async with bus.acquire_lock("lock"):
        assert await bus.is_locked("lock")
    assert not await bus.is_locked("lock")


@pytest.mark.asyncio
async def test_try_lock_claims_once_until_unlocked(bus):
    assert await bus.try_lock("claim")
    assert not await bus.try_lock("claim")
    await bus.unlock("claim")
    assert await bus.try_lock("claim")


# ── Mode F: registry ──────────────────────────────────────────────────


@pytest.mark.asyncio
async def test_registry_set_get_exists_del_drop(bus):
    await bus.registry_set("ns", "a", "1")
    await bus.registry_set("ns", "b", "2")
    assert await bus.registry_get("ns", "a") == "1"
    assert await bus.registry_exists("ns", "b")
    assert await bus.registry_getall("ns") == {"a": "1", "b": "2"}
    await bus.registry_del("ns", "a")
    assert await bus.registry_get("ns", "a") is None
    await bus.registry_drop("ns")
    assert await bus.registry_getall("ns") == {}
    await bus.registry_del("ns", "missing")


@pytest.mark.asyncio
async def test_registry_compare_and_set_and_pop(bus):
    if not hasattr(InMemoryMessageBus, "registry_pop"):
        pytest.skip("this agentscope's bus has no registry_set_if/pop")
    await bus.registry_set("ns", "f", "old")
    assert not await bus.registry_set_if("ns", "f", "new", expected="x")
    assert await bus.registry_set_if("ns", "f", "new", expected="old")
    assert await bus.registry_pop("ns", "f") == "new"
    assert await bus.registry_pop("ns", "f") is None


# ── What the fake adds: Redis TTLs and leases on virtual time ─────────


@pytest.mark.asyncio
async def test_registry_namespace_expires_after_its_ttl():
    clock = VirtualClock()
    bus = VirtualRedisBus(clock.now)
    await bus.registry_set("ns", "f", "1", ttl_secs=600)
    clock.advance_by(599)
    assert await bus.registry_get("ns", "f") == "1"
    await bus.registry_set("ns", "g", "2", ttl_secs=600)  # sliding refresh
    clock.advance_by(599)
    assert await bus.registry_getall("ns") == {"f": "1", "g": "2"}
    clock.advance_by(1)
    assert await bus.registry_getall("ns") == {}
    assert bus.peek_registry("ns") == {}


@pytest.mark.asyncio
async def test_queue_and_log_expire_after_their_ttl():
    clock = VirtualClock()
    bus = VirtualRedisBus(clock.now)
    await bus.queue_push("q", {"n": 1}, ttl_secs=10)
    await bus.log_append("log", {"n": 1}, ttl_secs=10)
    clock.advance_by(10)
    assert await bus.queue_drain("q") == []
    assert await bus.log_read("log") == []


@pytest.mark.asyncio
async def test_a_drained_queue_keeps_its_ttl():
    """Redis keeps a stream whose last entry was drained, TTL and all: a
    push without a TTL then expires with the earlier one."""
    clock = VirtualClock()
    bus = VirtualRedisBus(clock.now)
    await bus.queue_push("q", {"n": 1}, ttl_secs=10)
    assert len(await bus.queue_drain("q")) == 1
    await bus.queue_push("q", {"n": 2})
    clock.advance_by(10)
    assert await bus.queue_drain("q") == []


@pytest.mark.asyncio
async def test_try_lock_claim_expires_after_its_lease():
    clock = VirtualClock()
    bus = VirtualRedisBus(clock.now)
    assert await bus.try_lock("claim", ttl_secs=30)
    clock.advance_by(29)
    assert not await bus.try_lock("claim", ttl_secs=30)
    clock.advance_by(1)
    assert await bus.try_lock("claim", ttl_secs=30)


def test_lock_of_a_crashed_holder_frees_when_its_lease_runs_out():
    """A holder that dies without releasing blocks others for one lease,
    and not a second longer, on virtual time."""
    clock = VirtualClock()
    loop = VirtualTimeEventLoop(clock)
    try:
        interleaver = Interleaver(loop)
        bus = VirtualRedisBus(clock.now)
        abandoned = []  # keeps the context alive: nothing ever exits it

        async def crashes_while_holding():
            held = bus.acquire_lock("lock", ttl_secs=30)
            abandoned.append(held)
            await held.__aenter__()  # the process dies inside the lock

        async def waits_for_lock():
            async with bus.acquire_lock("lock", ttl_secs=30):
                return clock.now()

        interleaver.spawn(crashes_while_holding(), "crashes")
        waiter = interleaver.spawn(waits_for_lock(), "waiter")
        assert not waiter.done
        assert bus.held_locks() == ["lock"]
        interleaver.pass_time(29)
        assert not waiter.done
        interleaver.pass_time(1)
        assert waiter.task.result() == 30
    finally:
        loop.close()


def test_lock_of_a_live_holder_never_expires():
    """A live holder renews its lease, as Redis' heartbeat does."""
    clock = VirtualClock()
    loop = VirtualTimeEventLoop(clock)
    try:
        interleaver = Interleaver(loop)
        bus = VirtualRedisBus(clock.now)
        release = asyncio.Event()

        async def holds_for_long():
            async with bus.acquire_lock("lock", ttl_secs=30):
                await release.wait()

        holder = interleaver.spawn(holds_for_long(), "holder")
        interleaver.pass_time(3600)
        assert bus.lock_holder("lock") is holder.task
        release.set()
        interleaver.quiesce()
        assert bus.lock_holder("lock") is None
    finally:
        loop.close()

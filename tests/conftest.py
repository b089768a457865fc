"""Fixtures the tests share: the kernel alone (an interleaver in control
of a virtual-time loop, no agentscope app), and the tests' real
redis-server: one per test process (each pytest-xdist worker is one),
started on first use and stopped with the session."""
from __future__ import annotations

import asyncio

import pytest

from harness.kernel.clock import VirtualClock
from harness.kernel.event_loop import VirtualTimeEventLoop
from harness.kernel.interleaver import Interleaver
from harness.kernel.redis_server import RedisServer, RedisServerMissing


def fail_for_want_of_redis(missing: RedisServerMissing):
    """Fail the calling test with the one line naming the package: a
    failure, never a skip (nor an error in a fixture's setup)."""
    pytest.fail(f"RedisServerMissing: {missing}", pytrace=False)


@pytest.fixture(scope="session")
def redis_server():
    """A function returning this process' server. Called in a test's body,
    so that a missing ``redis-server`` fails that test."""
    try:
        server = RedisServer.start()
    except RedisServerMissing as missing:
        yield lambda: fail_for_want_of_redis(missing)
        return
    yield lambda: server
    server.stop()


@pytest.fixture
def kernel():
    """An interleaver in control of a fresh virtual-time loop."""
    clock = VirtualClock()
    loop = VirtualTimeEventLoop(clock)
    interleaver = Interleaver(loop)
    interleaver.controlling = True
    yield interleaver
    interleaver.controlling = False
    for record in interleaver.tasks() + interleaver.crashed():
        if record.gate is not None and not record.gate.done():
            record.gate.set_result(None)
    for record in interleaver.tasks() + interleaver.crashed():
        record.task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.set_task_factory(None)
    loop.close()

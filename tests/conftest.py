"""The tests' real redis-server: one per test process (each pytest-xdist
worker is one), started on first use and stopped with the session."""
from __future__ import annotations

import pytest

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

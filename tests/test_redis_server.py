"""The kernel's real redis-server: it comes up, time passes on it, it
leaves nothing behind, and its absence is one line naming the package."""
from __future__ import annotations

import pytest

from harness.kernel.redis_server import (
    RedisServer,
    RedisServerMissing,
    redis_server_binary,
    shorten_ttls,
)


def test_a_missing_binary_is_one_line_naming_the_package(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RedisServerMissing) as missing:
        redis_server_binary()
    assert str(missing.value) == (
        "redis-server not found on PATH: install Debian's redis-server "
        "package (apt-get install redis-server)"
    )


def emptied(redis_server) -> RedisServer:
    """The session's server (the test fails here without one), emptied."""
    server = redis_server()
    server.flush()
    return server


def test_time_passing_shortens_every_ttl_and_deletes_what_runs_out(redis_server):
    client = emptied(redis_server).client()
    client.set("lease", "1", ex=10)
    client.set("short", "1", px=1500)
    client.set("forever", "1")
    assert shorten_ttls(client, 1) == 2
    assert 8_000 < client.pttl("lease") <= 9_000
    assert 0 < client.pttl("short") <= 500
    assert client.pttl("forever") == -1
    shorten_ttls(client, 0.5)
    assert not client.exists("short")
    assert client.exists("lease", "forever") == 2


def test_negative_time_gives_seconds_back(redis_server):
    client = emptied(redis_server).client()
    client.set("lease", "1", ex=1)
    shorten_ttls(client, -2)
    assert 2_000 < client.pttl("lease") <= 3_000


def test_flush_empties_the_server(redis_server):
    server = emptied(redis_server)
    server.client().set("key", "1")
    server.flush()
    assert server.client().dbsize() == 0


def test_stop_leaves_no_process_and_no_directory(redis_server):
    redis_server()  # fails here, in one line, without redis-server
    server = RedisServer.start()
    server.stop()
    assert server.process.poll() is not None
    assert not server.workdir.exists()
    server.stop()  # and again: harmless

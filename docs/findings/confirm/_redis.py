"""A redis-server of the script's own, for the confirming scripts that run
on agentscope's ``RedisMessageBus``.

Debian's binary on a free loopback port, in a scratch folder, with no
persistence; the script waits until it answers, and it is stopped and its
folder removed when the script is done. No harness code: the scripts
confirm findings outside the harness.
"""
from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis

#: How long a fresh server gets to answer its first PING (50 × 0.1 s).
_PINGS = 50


class RedisServerUnavailable(RuntimeError):
    """redis-server is not installed, or did not answer (the scripts exit 2)."""


@dataclass
class RedisServer:
    """A running server: where it listens, its scratch folder, and a client
    of its own (strings decoded) for looking at its keys."""

    port: int
    folder: Path
    admin: aioredis.Redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.asynccontextmanager
async def redis_server(name: str) -> AsyncIterator[RedisServer]:
    """A fresh redis-server for script ``name`` (its folder is named after
    it), answering before it is handed over."""
    if shutil.which("redis-server") is None:
        raise RedisServerUnavailable("redis-server not found on PATH: install Debian's redis-server package")
    folder = Path(tempfile.mkdtemp(prefix=f"confirm-{name}-"))
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    admin = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    try:
        for _ in range(_PINGS):
            try:
                await admin.ping()
                break
            except Exception:  # noqa: BLE001 - server still starting
                await asyncio.sleep(0.1)
        else:
            raise RedisServerUnavailable("redis-server did not answer")
        yield RedisServer(port, folder, admin)
    finally:
        await admin.aclose()
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)

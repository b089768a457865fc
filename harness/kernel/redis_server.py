"""A real ``redis-server`` for tests and the harness, and time passing on it.

The fake bus claims Redis semantics; the only way to hold it to that is to
run the same operations on a real server. :meth:`RedisServer.start` runs
Debian's ``redis-server`` on a free loopback port, in a temporary working
directory, with persistence off, and returns once it answers ``PING``.
One server per test process is the intended use (a session-scoped pytest
fixture; each pytest-xdist worker is its own process).

No server is left behind: it runs in its own process group, so a Ctrl-C
at the terminal reaches the tests (whose teardown stops it) and not the
server first; :func:`atexit` stops it when the interpreter exits normally
or on an unhandled exception or ``KeyboardInterrupt``; and on Linux the
kernel kills it when the thread that started it dies (``PR_SET_PDEATHSIG``),
which covers ``SIGTERM``, ``SIGKILL`` and crashes of the test process.
What can remain after such a death is the temporary directory (a log file
and a pid file under the system's temp dir).

Redis' clock cannot be mocked. The bus differential test lets virtual
time reach a real server as :func:`shorten_ttls`: every key with a TTL
loses the elapsed virtual seconds, and a key whose TTL would reach zero is
deleted, which is what the server would have done had that much time
passed. A world in Redis mode goes further and never lets the server end
a key (:mod:`.redis_expiry`).
"""
from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

HOST = "127.0.0.1"

#: Wall-clock seconds a server may take to answer ``PING`` (the one
#: wall-clock wait in the harness).
READY_WITHIN = 10.0

#: Tries with a fresh port, when another process took the one picked.
PORT_ATTEMPTS = 3

#: Lines of the server's log quoted when it does not come up.
LOG_TAIL_LINES = 15

_PR_SET_PDEATHSIG = 1

#: One round trip for the whole keyspace, and atomic: nothing runs on the
#: server between one key's ``PTTL`` and its ``PEXPIRE``.
SHORTEN_TTLS_LUA = """
local elapsed = tonumber(ARGV[1])
if elapsed == 0 then return 0 end
local shortened = 0
for _, key in ipairs(redis.call('KEYS', '*')) do
  local left = redis.call('PTTL', key)
  if left > 0 then
    if left <= elapsed then
      redis.call('DEL', key)
    else
      redis.call('PEXPIRE', key, left - elapsed)
    end
    shortened = shortened + 1
  end
end
return shortened
"""


class RedisServerMissing(RuntimeError):
    """``redis-server`` is not installed."""


class RedisServerFailed(RuntimeError):
    """``redis-server`` was started but did not come up."""


def redis_server_binary() -> str:
    """The path of ``redis-server``, or one line saying what to install."""
    path = shutil.which("redis-server")
    if path is None:
        raise RedisServerMissing(
            "redis-server not found on PATH: install Debian's redis-server "
            "package (apt-get install redis-server)",
        )
    return path


def shorten_ttls(client, seconds: float):
    """Let ``seconds`` of virtual time pass for every key with a TTL on the
    server ``client`` talks to (sync or ``redis.asyncio``: await the result
    of the latter). Negative ``seconds`` lengthen every TTL instead: how a
    caller gives back the wall-clock time the server counted while no
    virtual time passed. Returns how many keys had a TTL. Keys are listed
    with ``KEYS``, fine for a test's database, not for a large one."""
    return client.eval(SHORTEN_TTLS_LUA, 0, round(seconds * 1000))


def _free_port() -> int:
    """A port nothing listens on right now (another process may take it
    before the server binds it: :meth:`RedisServer.start` then retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _die_with_this_thread():
    """A ``preexec_fn`` that makes the child get ``SIGKILL`` when the thread
    that started it dies, or ``None`` where Linux' prctl is unavailable (or
    off the main thread, whose death would kill the server too early)."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return set_parent_death_signal


class RedisServer:
    """One running ``redis-server`` on ``HOST:port``."""

    host = HOST

    def __init__(self, process: subprocess.Popen, port: int, workdir: Path) -> None:
        self.process = process
        self.port = port
        self.workdir = workdir
        self._client: redis.Redis | None = None
        atexit.register(self.stop)

    @classmethod
    def start(cls) -> "RedisServer":
        """Start a server and wait until it answers ``PING``."""
        binary = redis_server_binary()
        attempts_left = PORT_ATTEMPTS
        while True:
            workdir = Path(tempfile.mkdtemp(prefix="redis-server-"))
            port = _free_port()
            server = cls(_launch(binary, port, workdir), port, workdir)
            attempts_left -= 1
            try:
                server._wait_until_ready()
                return server
            except RedisServerFailed:
                port_taken = "Address already in use" in server.log_tail()
                server.stop()
                if not port_taken or not attempts_left:
                    raise

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_WITHIN
        probe = redis.Redis(
            host=self.host,
            port=self.port,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
        )
        try:
            self._poll(probe, deadline)
        finally:
            probe.close()

    def _poll(self, probe: redis.Redis, deadline: float) -> None:
        while True:
            if self.process.poll() is not None:
                raise RedisServerFailed(
                    f"redis-server exited with status {self.process.returncode} "
                    f"before answering PING; its log ends:\n{self.log_tail()}",
                )
            try:
                if probe.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RedisServerFailed(
                    f"redis-server did not answer PING on {self.host}:{self.port} "
                    f"within {READY_WITHIN} s; its log ends:\n{self.log_tail()}",
                )
            time.sleep(0.02)

    def client(self) -> redis.Redis:
        """A synchronous client of this server (strings, not bytes)."""
        if self._client is None:
            self._client = redis.Redis(
                host=self.host,
                port=self.port,
                decode_responses=True,
                socket_timeout=READY_WITHIN,
            )
        return self._client

    def flush(self) -> None:
        """Empty every database (``FLUSHALL``): a fresh server for the next
        example without starting one."""
        self.client().flushall()

    def log_tail(self) -> str:
        """The last lines of the server's log."""
        log = self.workdir / "redis.log"
        if not log.exists():
            return "(no log written)"
        return "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])

    def stop(self) -> None:
        """Stop the server's process group and remove its directory
        (idempotent)."""
        atexit.unregister(self.stop)
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def _launch(binary: str, port: int, workdir: Path) -> subprocess.Popen:
    """``redis-server`` on ``HOST:port``, persistence off, in its own
    session (hence process group); its output (the log, and a refused
    option's error) goes to ``workdir/redis.log``."""
    with open(workdir / "redis.log", "wb") as log:
        return subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
            [
                binary,
                "--port", str(port),
                "--bind", HOST,
                "--dir", str(workdir),
                "--save", "",
                "--appendonly", "no",
                "--daemonize", "no",
                "--pidfile", str(workdir / "redis.pid"),
            ],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_this_thread(),
        )

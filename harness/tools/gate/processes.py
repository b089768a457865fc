"""The gate's child processes, through anyio.

Each child runs in its own process group, its output (stdout and stderr
together) is read line by line as it comes, and it is bounded in time
(``anyio.fail_after``). When its time runs out, or the gate itself is
stopped, the whole group is ended: the property suite's pytest-xdist
workers go with it, so the gate never waits on an orphan.
"""
from __future__ import annotations

import os
import signal
import subprocess
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

#: Seconds a group is given to end after SIGTERM, before SIGKILL.
GRACE = 5.0

#: Lines of output kept for a one-line reason when a child fails.
TAIL_LINES = 15


class TimedOut(Exception):
    """A child did not finish within its time limit (it was ended)."""

    def __init__(self, seconds: float, tail: list[str]):
        super().__init__(f"did not finish within {seconds:g} s")
        self.seconds = seconds
        self.tail = tail


@dataclass
class Finished:
    """A child that ended by itself: its exit code and its last lines."""

    returncode: int
    tail: list[str] = field(default_factory=list)

    def last_line(self, default: str = "no output") -> str:
        """The last non-blank line of its output."""
        return next((line.strip() for line in reversed(self.tail) if line.strip()), default)


async def stream(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    limit: float | None = None,
) -> Finished:
    """Run ``command``, handing each line of its output to ``on_line`` as it
    comes; :class:`TimedOut` if it has not finished within ``limit``
    seconds (``None``: no limit), its whole process group ended."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)

    def heard(line: str) -> None:
        tail.append(line)
        if on_line is not None:
            on_line(line)

    try:
        with anyio.fail_after(limit):
            process = await anyio.open_process(
                list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
            try:
                await _read_lines(process, heard)
                returncode = await process.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await end_group(process)
    except TimeoutError:
        raise TimedOut(limit or 0.0, list(tail)) from None
    return Finished(returncode, list(tail))


async def _read_lines(process: Process, heard: Callable[[str], None]) -> None:
    """Every line ``process`` writes, until it closes its output."""
    pending = ""
    async for chunk in TextReceiveStream(process.stdout, errors="replace"):
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            heard(line.rstrip("\r"))
    if pending:
        heard(pending)


async def end_group(process: Process) -> None:
    """End ``process`` and every process of its group: SIGTERM, then
    SIGKILL once :data:`GRACE` seconds have passed (a group whose leader
    already ended by itself is left alone)."""
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(GRACE):
            await process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # what outlived the leader
        await process.wait()
    await process.aclose()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group has ended

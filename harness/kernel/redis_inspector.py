"""How the harness reads a real redis-server, and stages lease faults on it."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .redis_link import RedisLink


class RedisInspector:
    """The :class:`~harness.kernel.bus_inspector.BusInspector` of a real
    server: it reads the server, and stages lease faults as the commands
    that carry them failing (a heartbeat's ``EXPIRE``, a release's ``GET``).
    ``is_heartbeat`` tells agentscope's lock heartbeat task from any other.
    """

    def __init__(self, link: RedisLink, is_heartbeat: Callable[[asyncio.Task, str | None], bool]) -> None:
        self._link = link
        self._is_heartbeat = is_heartbeat

    @property
    def faults_fired(self) -> list[str]:
        return [key for command, key in self._link.fired if command in ("EXPIRE", "GET")]

    def peek_queue(self, key: str) -> list[dict]:
        return self._link.queue(key)

    def peek_registry(self, namespace: str) -> dict[str, str]:
        return self._link.registry(namespace)

    def lock_holder(self, key: str) -> Any:
        return self._link.value(key)

    def _heartbeats(self, key: str | None = None) -> list[asyncio.Task]:
        loop = self._link.interleaver.loop
        return [t for t in asyncio.all_tasks(loop) if not t.done() and self._is_heartbeat(t, key)]

    def process_died(self, tasks: list[Any]) -> None:
        """Their heartbeats stop, as the process that ran them did (they
        hold nothing to clean up: cancelling one is its end)."""
        for task in tasks:
            if task in self._heartbeats():
                task.cancel()

    def renewal_fails(self, key: str) -> bool:
        """The next renewal of ``key``'s lease fails on the wire; its
        heartbeat ends there, as agentscope's does on any error."""
        if self._link.value(key) is None or not self._heartbeats(key):
            return False
        self._link.fail_next("EXPIRE", key)
        return True

    def release_fails(self, key: str) -> None:
        """The next release of ``key`` fails on the wire (agentscope's
        release reads the lock's token first): the lock stays until its
        lease runs out."""
        self._link.fail_next("GET", key)

    def waiter_overtaken(self, key: str) -> None:
        """Nothing to stage: agentscope's Redis bus polls a taken lock
        every 0.1 s of virtual time, so another acquirer can take it first
        whenever the story lets one act in between."""

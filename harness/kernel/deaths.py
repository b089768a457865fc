"""A process dies: its tasks stop where they are and never move again.

Part of :class:`~harness.kernel.interleaver.Interleaver` (its task
registry: ``_records``, ``_crashed``, ``_dead_nodes``, :meth:`tasks`).
"""
from __future__ import annotations

import asyncio

from .tasks import ControlledTask, never_again


class Deaths:
    """Crashes of one run's process, or of a whole node's."""

    def crash(self, record: ControlledTask) -> list[ControlledTask]:
        """The process running ``record`` dies: it and every task it
        started stop where they are and never move again (no ``finally``
        runs); returns them. The world goes on without them."""
        doomed = [r for r in self.tasks() if r is record or self._descends(r, record)]
        self._crashed.extend(doomed)
        return doomed

    def crash_node(self, node: int) -> list[ControlledTask]:
        """Node ``node``'s process dies: every task of it stops where it
        is (see :meth:`crash`), and any task one of them starts later (a
        timer of the dead process still waking it) is dead too; returns
        them."""
        self._dead_nodes.add(node)
        doomed = [r for r in self.tasks() if r.node == node]
        self._crashed.extend(doomed)
        return doomed

    def current_crashed(self) -> bool:
        """Whether the running task belongs to a dead process."""
        task = asyncio.current_task()
        record = self._records.get(task) if task else None
        return record is not None and record in self._crashed

    async def freeze_if_crashed(self) -> None:
        """A task of a dead process that still wakes (a timer it set)
        reaches no storage and no bus: it waits here for ever."""
        if self.current_crashed():
            await never_again()

    def crashed(self) -> list[ControlledTask]:
        """Crashed tasks that have not been closed down yet."""
        return [r for r in self._crashed if not r.done]

    @staticmethod
    def _descends(record: ControlledTask, ancestor: ControlledTask) -> bool:
        current = record.parent
        while current is not None:
            if current is ancestor:
                return True
            current = current.parent
        return False

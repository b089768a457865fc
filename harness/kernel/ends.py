"""A world's start and end, each under the interleaver's hand.

Part of :class:`~harness.kernel.interleaver.Interleaver` (its task
registry, switch points and quiescence: ``_release``, :meth:`held`,
:meth:`tasks`, ``_until_quiescent``); :meth:`_internal_task` serves its
:meth:`run_uncontrolled` too.
"""
from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Ends:
    """Harness code that starts tasks, one step at a time; every task
    cancelled at the end, with no cancel inside outside work."""

    def _internal_task(self, coro: Coroutine) -> asyncio.Task:
        """A task for harness code: not a controlled task itself (what
        :meth:`run_uncontrolled` runs)."""
        self._creating_internal = True
        try:
            return self.loop.create_task(coro)
        finally:
            self._creating_internal = False

    def run_one_step_at_a_time(self, coro: Coroutine) -> Any:
        """Run harness code that starts tasks (a dispatcher's start) under
        control: the tasks it makes move one switch point at a time, the
        oldest held first, each once the last is back, until the code has
        returned and nothing is held. The code itself is not held.

        Started uncontrolled, such tasks raced: against a real server,
        which of two commands sent together is answered first is the
        server's and the network's choice, not the story's."""
        if not self.controlling:
            raise RuntimeError("run_one_step_at_a_time needs control on")
        return self.run_uncontrolled(self._one_step_at_a_time(coro))

    async def _one_step_at_a_time(self, coro: Coroutine) -> Any:
        code = self._internal_task(coro)
        while True:
            await self._until_quiescent()
            held = self.held()
            if held:
                self._release(held[0])
            elif code.done():
                return code.result()
            else:
                raise RuntimeError("harness code waits for something no task can give")

    async def cancel_every_task(self, horizon: float) -> None:
        """Cancel every controlled task (crashed ones too) where it waits,
        then any task their clean-up starts, until none is left. Each round
        waits until the world is quiet and cancels with no await between:
        no cancel lands inside outside work. (A storage call cancelled
        part-way can leave sqlite locked for the next story: F15.) Time
        passes as the clean-ups need it (a poll, a backoff), up to
        ``horizon`` virtual seconds on."""
        give_up_at = self.loop.clock.now() + horizon
        while True:
            await self._until_quiescent()
            pending = [
                r.task for r in self.tasks() + self.crashed()
                if r.task is not asyncio.current_task()
            ]
            if not pending:
                return
            for task in pending:
                task.cancel()
            while True:
                await self._until_quiescent()
                if all(task.done() for task in pending):
                    break
                deadline = self.loop.next_timer_deadline()
                if deadline is None or deadline > give_up_at:
                    return  # they wait for ever: left as they are
                self.loop.clock.advance_to(max(deadline, self.loop.clock.now()))

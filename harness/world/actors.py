"""Who may move on their own: actors, and the helpers that work for them.

*Actors* are the independent parties of a story: every chat run (spawned
by agentscope's run registry), the wake-up dispatcher, its backoff retries,
the cancel dispatcher's loops, a background tool's deliverer, and each
action the harness performs on a user's or a producer's behalf. Every other
task is a *helper* of the actor that created it (a run's shielded persist,
SQLAlchemy's session closers), and moves whenever its actor is moved. The
interleaving choices are between actors.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from harness.kernel.interleaver import ControlledTask, Interleaver, Op

from .surface import AGENTSCOPE_ACTOR

#: Prefix of every task the harness starts on someone's behalf.
HARNESS_ACTOR_PREFIX = "» "

#: The node a label names, in worlds of several nodes (``name@1#2``).
_NODE_SUFFIX = re.compile(r"@\d+(?=#|$)")


def without_node(label: str) -> str:
    """``label`` without the node it names (``wakeup-dispatcher@1`` is
    the wake-up dispatcher of node 1)."""
    return _NODE_SUFFIX.sub("", label)


class Actors:
    """Actor bookkeeping over an :class:`Interleaver`, and moving them."""

    def __init__(self, interleaver: Interleaver) -> None:
        self._interleaver = interleaver

    @staticmethod
    def is_actor(record: ControlledTask) -> bool:
        label = without_node(record.label or "")
        return label.startswith(HARNESS_ACTOR_PREFIX) or bool(
            AGENTSCOPE_ACTOR.search(label),
        )

    def actor_of(self, record: ControlledTask) -> ControlledTask:
        """The actor a task works for (itself, if it is one)."""
        current: ControlledTask | None = record
        while current is not None:
            if self.is_actor(current):
                return current
            current = current.parent
        return record

    def working_for(self, actor: ControlledTask) -> list[ControlledTask]:
        """Live tasks that work for ``actor`` (itself included), oldest
        first."""
        return [r for r in self._interleaver.tasks() if self.actor_of(r) is actor]

    def live(self) -> list[ControlledTask]:
        """Live actors, oldest first."""
        return [r for r in self._interleaver.tasks() if self.is_actor(r)]

    def movable(self) -> list[ControlledTask]:
        """Live actors that could take a step now (they or a helper is
        held at a switch point)."""
        movable = {self.actor_of(r).index for r in self._interleaver.held()}
        return [a for a in self.live() if a.index in movable]

    def start(
        self,
        coro,
        label: str,
        node: int = 0,
        stop: Callable[[ControlledTask], bool] | None = None,
    ) -> ControlledTask:
        """Start an action on someone's behalf, on ``node``, and let it run
        to its end (or until it waits for another actor, or ``stop``
        holds: see :meth:`finish`)."""
        record = self._interleaver.spawn(coro, HARNESS_ACTOR_PREFIX + label, node)
        self.finish(record, stop)
        return record

    def held_at(self, op: Op) -> Callable[[ControlledTask], bool]:
        """A ``stop`` for :meth:`finish`: the actor (or a helper) is held
        just before ``op``."""
        return lambda actor: any(r.held and r.pending == op for r in self.working_for(actor))

    def step(self, actor: ControlledTask) -> None:
        """One switch point of ``actor`` (or of its oldest held helper)."""
        mine = [r for r in self.working_for(actor) if r.held]
        if mine:
            self._interleaver.advance(mine[0])

    def step_past(self, actor: ControlledTask, wanted: Callable[[Op], bool]) -> None:
        """Move ``actor`` and its helpers, oldest first, one switch point
        at a time, until it has done one operation ``wanted`` picks (or it
        ends, or can only wait for another actor): a party's step in an
        interleaving aimed at one protocol's operations."""
        while not actor.done:
            mine = [r for r in self.working_for(actor) if r.held]
            if not mine:
                return
            op = mine[0].pending
            self._interleaver.advance(mine[0])
            if op is not None and wanted(op):
                return

    def finish(
        self,
        actor: ControlledTask,
        stop: Callable[[ControlledTask], bool] | None = None,
    ) -> bool:
        """Move ``actor`` and its helpers, oldest first, until it ends, it
        can only wait for another actor, or ``stop(actor)`` holds."""
        while not actor.done:
            if stop is not None and stop(actor):
                return True
            mine = [r for r in self.working_for(actor) if r.held]
            if not mine:
                return False
            self._interleaver.advance(mine[0])
        return True

"""A node's life as an operator sees it, and a session's end: a graceful
shutdown and a restart (every rolling upgrade), and a session deleted
while it works.
Part of the :class:`~.world.World` façade, beside its faults.

Both go through agentscope's own code paths: the shutdown is the app's
lifespan exit (:meth:`~.app.AgentscopeApp.close`: the dispatchers stop,
``ChatRunRegistry.__aexit__`` cancels every run in flight and waits for
its clean-up, the background tasks are cancelled), the restart a new app
on the same storage and bus whose wake-up dispatcher drains on start; the
delete is the session route's ``delete_session``. Each is an actor of its
node, so every bus operation it makes is a switch point, and a run it
cancels finishes its clean-up under control like any other.
"""
from __future__ import annotations

from harness.kernel.interleaver import ControlledTask

from . import parties
from .nodes import rebuild_node


class WorldLifecycle:
    """Shutdowns, restarts and deletes, as :class:`~.world.World` offers
    them."""

    def restart_node(self, node: int = 0) -> set[str]:
        """Node ``node`` shuts down gracefully, as agentscope's lifespan
        exit does, and a new process takes its place on the same storage
        and bus. Returns the sessions whose runs the shutdown cancelled."""
        old = self.nodes[node]
        cancelled = {
            alias for alias, session_id in self.sessions.items()
            if old.app.registry.get(session_id) is not None
        }
        self._see_through(self.actors.start(old.app.close(), f"node {node} shuts down", node), node)
        old.app = rebuild_node(self.stage, self.interleaver, old, self.nodes[0] if node else old)
        if node == 0:
            self.app = old.app
        self._see_through(self.actors.start(_start(old.app), f"node {node} starts", node), node)
        return cancelled

    def delete_and_reopen(self, alias: str) -> str:
        """The user deletes ``alias``'s session through agentscope's delete
        route, then opens a new one under the same alias. Returns the
        deleted session's id."""
        deleted = self.sessions[alias]
        action = parties.delete_session(self.app, self._agents[alias], deleted)
        self._see_through(self.actors.start(action, f"user deletes {alias}"), 0)
        self._meet(alias, self.setup(self.app.open_session(alias)))
        self.deleted[deleted] = alias
        return deleted

    def _see_through(self, actor: ControlledTask, node: int) -> None:
        """Move ``actor`` to its end; whenever it waits for another actor
        (a run finishing its clean-up, a dispatcher subscribing), the
        oldest that can move on ``node`` takes a step, and when none can,
        the world settles (time passes for a lease or a retry)."""
        while not self.actors.finish(actor):
            others = [a for a in self.actors.movable() if a.node == node and a is not actor]
            if others:
                self.actors.step(others[0])
                continue
            self.settle()
            if not actor.done:
                raise RuntimeError(f"{actor.label} cannot finish: nothing it waits for can move")


async def _start(app) -> None:
    """The app's dispatchers start, in the order agentscope's lifespan
    starts them (the wake-up dispatcher drains what waited meanwhile)."""
    await app.dispatcher.__aenter__()
    await app.cancel_dispatcher.__aenter__()

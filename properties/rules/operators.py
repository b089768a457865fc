"""The operator: a node's graceful shutdown and restart, as every rolling
upgrade does (machines with ``restarts``). In a story of several nodes,
restarting each in turn is a rolling restart."""
from __future__ import annotations

from .story_rule import OnNode, story_rule


class Restarts:
    """A node shuts down gracefully and a new process takes its place."""

    @story_rule(
        node=OnNode(),
        says=lambda node=None: (
            f"Node {node or 0} shuts down gracefully, as a rolling upgrade does (its "
            "dispatchers stop, its runs are cancelled and finish their clean-up), and "
            "a new process takes its place on the same storage and bus."
        ),
    )
    def node_restarts(self, node: int | None = None) -> None:
        """agentscope's lifespan exit on one node, then a new app in its
        place whose wake-up dispatcher drains on start. What each session
        was doing as it began is recorded: a card showing then must still
        show after (I16)."""
        views = {alias: self.world.observe_session(alias) for alias in self.world.sessions}
        cancelled = self.world.restart_node(node or 0)
        self.ledger.restart(views, cancelled)

"""The operator's and the user's ends of things: a node's graceful
shutdown and restart, as every rolling upgrade does (machines with
``restarts``; in a story of several nodes, restarting each in turn is a
rolling restart), and a session deleted while it works (machines with
``deletes``)."""
from __future__ import annotations

from .story_rule import OnNode, Where, story_rule


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


class SessionDeletes:
    """The user deletes a session that leads no team and works for none."""

    @story_rule(
        when=lambda self: any(map(self.deletable, self.cast)),
        session=Where("deletable"),
        says=lambda session: (
            f"The user deletes {session}'s session (agentscope's delete route: a run in "
            f"flight is cancelled, then the record and its bus state go) and opens a new one."
        ),
    )
    def user_deletes_session(self, session: str) -> None:
        """agentscope's delete route, whatever the session is doing; then a
        fresh session under the same alias, so the story goes on. The
        deleted one must be left alone from then on (I18)."""
        before = self.world.observe_session(session)
        self.world.delete_and_reopen(session)
        self.ledger.forget(before)

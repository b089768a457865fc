"""Members a leader was asked to invite, until their session shows up.

``AgentInvite`` mints the member's session when the leader's model calls
it, which may be a later run than the one the user's request started (the
endpoint answered 409 while a run was in flight). The world names a
member's session as soon as storage has it, whenever that is.
"""
from __future__ import annotations

from collections.abc import Callable

from .app import AgentscopeApp
from .cast import TEAM_OF


class Invitations:
    """Pending invitations; storage is read again only after writes."""

    def __init__(self, app: AgentscopeApp, setup: Callable) -> None:
        self._app = app
        self._setup = setup
        self._pending: set[str] = set()
        self._checked_at = -1

    def sent(self, member: str) -> None:
        self._pending.add(member)
        self._checked_at = -1

    def meet(self, meet: Callable[[str, str], None]) -> None:
        """Tell ``meet(member, session_id)`` of each invited member whose
        session now exists."""
        writes = self._app.storage.writes
        if not self._pending or writes == self._checked_at:
            return
        self._checked_at = writes
        for member in sorted(self._pending):
            session_id = self._setup(self._app.team_session_of(member, TEAM_OF[member]))
            if session_id is not None:
                self._pending.discard(member)
                meet(member, session_id)

"""What a story wrote to storage, as far as the harness reads it back.

agentscope gets an :class:`AccountedStorage` in place of its SQL storage.
It knows which session each write named (a ``session_id`` argument, or the
session ``upsert_session`` returned), so that an observation reads a
session's stored state again only after a write that may have changed it,
and which sessions ``upsert_session`` wrote, so that a story's clean-up
lists no agent it need not.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from harness.kernel.controlled_storage import SerialStorage


class AccountedStorage(SerialStorage):
    """Serialised storage that keeps account of the sessions written."""

    def __init__(self, inner: Any, interleaver) -> None:
        super().__init__(inner, interleaver)
        #: Per session id: writes that named it and no other.
        self._naming: Counter[str] = Counter()
        #: Writes that may have changed any session: those naming none,
        #: every ``delete_...`` (a leader's cascades to its team members'
        #: sessions) and every write that did not finish.
        self._naming_any = 0
        self._upserted: list[tuple[str, str]] = []
        self._upsert_unfinished = False

    def written(self, name: str, arguments: dict[str, Any], result: Any, done: bool) -> None:
        session_id = arguments.get("session_id")
        if name == "upsert_session":
            if done:
                session_id = result.id
                self._upserted.append((result.agent_id, result.id))
            else:
                self._upsert_unfinished = True
        if done and session_id and not name.startswith("delete_"):
            self._naming[session_id] += 1
        else:
            self._naming_any += 1

    def version_of(self, session_id: str) -> tuple[int, int]:
        """Changes whenever a write may have changed ``session_id``'s
        stored record."""
        return self._naming_any, self._naming[session_id]

    def sessions_upserted(self) -> list[tuple[str, str]] | None:
        """``(agent_id, session_id)`` of each session ``upsert_session``
        made or updated, once each, in order; ``None`` when one did not
        finish (it may have made a session nobody knows of)."""
        return None if self._upsert_unfinished else list(dict.fromkeys(self._upserted))

"""How a story's ids read in traces, reports and failure messages.

Session ids become their alias (``leader``, ``worker``...); every other id
the story minted becomes its story-relative number (``#3``), because a raw
id carries the story's number in this process, which depends on what ran
before; background-task ids, which agentscope draws from ``shortuuid`` with
no hook, become ``job1``, ``job2``... in order of first appearance; and
stream entry ids a real redis-server assigned (``<its clock in ms>-<n>``,
e.g. an event checkpoint's cursor on 2.0.11) become ``entry1``,
``entry2``... the same way, because the server's clock is the wall clock.
"""
from __future__ import annotations

import re

from harness.kernel.trace import apply_aliases

from .marks import BACKGROUND_TASK_ID

#: A stream entry id a real server derived from its clock: milliseconds
#: since 1970, twelve digits or more (any date after March 1973). The fake
#: bus counts its ids from virtual time 0 (``0-7``, ``200-56``), which a
#: story never takes that far, so its ids stay as they are.
SERVER_STREAM_ID = re.compile(r"\b[1-9][0-9]{11,}-[0-9]+\b")


class Naming:
    """Readable names for one story's ids."""

    def __init__(self, story: int) -> None:
        self._story_ids = re.compile(rf"\b{story:06x}([0-9a-f]{{6}})0{{20}}\b")
        self._aliases: dict[str, str] = {}
        self._background_tasks: dict[str, int] = {}
        self._server_ids: dict[str, int] = {}

    def name(self, session_id: str, alias: str) -> None:
        """Show ``session_id`` as ``alias`` from now on."""
        self._aliases[session_id] = alias

    def __call__(self, text: str) -> str:
        """``text`` with every id replaced by its readable name."""
        text = self._story_ids.sub(
            lambda m: f"#{int(m.group(1), 16)}",
            apply_aliases(text, self._aliases),
        )
        text = BACKGROUND_TASK_ID.sub(
            lambda m: m.group(1) + self._background_task_number(m.group(2)),
            text,
        )
        return SERVER_STREAM_ID.sub(lambda m: self._server_id_name(m.group(0)), text)

    def _background_task_number(self, task_id: str) -> str:
        number = self._background_tasks.setdefault(task_id, len(self._background_tasks) + 1)
        return f"job{number}"

    def _server_id_name(self, entry_id: str) -> str:
        number = self._server_ids.setdefault(entry_id, len(self._server_ids) + 1)
        return f"entry{number}"

"""Serialised storage calls the interleaver can see.

agentscope's SQL storage runs its queries on aiosqlite's worker thread, which
hands results back to the loop whenever the OS lets it. That is the one source
of timing the loop cannot order by itself. :class:`SerialStorage` forwards
every coroutine method of the real storage, one call at a time in request
order, and tells the interleaver while a call is in flight, so quiescence waits
for it instead of racing it. The storage itself is untouched: this is an
object handed to agentscope's constructors in its place.

It also keeps account of what the calls wrote, so that the harness reads
storage only when it must: which sessions each write named, and which
sessions ``upsert_session`` created.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
from collections import Counter
from typing import Any

from .interleaver import Interleaver


class SerialStorage:
    """A forwarding proxy around a ``StorageBase``."""

    def __init__(self, inner: Any, interleaver: Interleaver) -> None:
        self._inner = inner
        self._interleaver = interleaver
        self._one_at_a_time: asyncio.Lock | None = None
        #: Bumped by every call that may write, so readers can cache.
        self.writes = 0
        #: Per session id: writes whose arguments named that session.
        self._writes_naming: Counter[str] = Counter()
        #: Writes that named no session (any session may have changed).
        self._writes_naming_none = 0
        #: ``(agent_id, session_id)`` of every session ``upsert_session``
        #: wrote, in order: the sessions made (or touched) through here.
        self.upserted_sessions: list[tuple[str, str]] = []
        #: Whether an ``upsert_session`` ended without its record (it
        #: raised, or its caller was cancelled): it may have made a session
        #: :attr:`upserted_sessions` does not name.
        self.upsert_unaccounted = False
        self._signatures: dict[str, inspect.Signature] = {}

    def version_of(self, session_id: str) -> tuple[int, int]:
        """Changes whenever a write may have changed ``session_id``'s
        stored record: a write that named it, or one that named no
        session at all."""
        return self._writes_naming_none, self._writes_naming[session_id]

    def _session_named(self, name: str, attr: Any, args: tuple, kwargs: dict) -> str | None:
        signature = self._signatures.get(name)
        if signature is None:
            signature = self._signatures[name] = inspect.signature(attr)
        try:
            return signature.bind(*args, **kwargs).arguments.get("session_id")
        except TypeError:  # the call itself will say what is wrong
            return None

    def _account_write(self, name: str, session_id: str | None, result: Any) -> None:
        if name == "upsert_session":
            if result is None:
                self.upsert_unaccounted = True
            else:
                session_id = result.id
                self.upserted_sessions.append((result.agent_id, result.id))
        if session_id:
            self._writes_naming[session_id] += 1
        else:
            self._writes_naming_none += 1

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        async def serialised(*args: Any, **kwargs: Any) -> Any:
            if self._one_at_a_time is None:
                self._one_at_a_time = asyncio.Lock()
            await self._interleaver.freeze_if_crashed()
            async with self._one_at_a_time:
                writes = not name.startswith(("get_", "list_"))
                if writes:
                    self.writes += 1
                    session_id = self._session_named(name, attr, args, kwargs)
                self._interleaver.outside_work_started()
                result = None
                try:
                    result = await attr(*args, **kwargs)
                    return result
                finally:
                    if writes:  # failed or not: it may have written
                        self._account_write(name, session_id, result)
                    self._interleaver.outside_work_finished()

        return serialised

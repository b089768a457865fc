"""Serialised storage calls the interleaver can see.

agentscope's SQL storage runs its queries on aiosqlite's worker thread, which
hands results back to the loop whenever the OS lets it. That is the one source
of timing the loop cannot order by itself. :class:`SerialStorage` forwards
every coroutine method of the real storage, one call at a time in request
order, and tells the interleaver while a call is in flight, so quiescence waits
for it instead of racing it. The storage itself is untouched: this is an
object handed to agentscope's constructors in its place. Each write, done
or not, is also handed to :meth:`SerialStorage.written` with its arguments
by name, for a subclass that keeps account of what was written. A story
can make every call naming one session fail for good (:attr:`failing`): a
storage error that stays, as a corrupt row or a lost shard would.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
from collections import Counter
from typing import Any

from .interleaver import Interleaver


class InjectedStorageFault(RuntimeError):
    """A storage call a story made fail, as a storage error that stays
    on one session would."""


class SerialStorage:
    """A forwarding proxy around a ``StorageBase``."""

    def __init__(self, inner: Any, interleaver: Interleaver) -> None:
        self._inner = inner
        self._interleaver = interleaver
        self._one_at_a_time: asyncio.Lock | None = None
        #: Bumped by every call that may write, so readers can cache.
        self.writes = 0
        self._signatures: dict[str, inspect.Signature] = {}
        #: Session ids whose every call fails from now on.
        self.failing: set[str] = set()
        #: Per session id, how many calls failed so.
        self.fired: Counter[str] = Counter()

    def written(self, name: str, arguments: dict[str, Any], result: Any, done: bool) -> None:
        """Called after each call that may write (``name`` neither
        ``get_...`` nor ``list_...``), with its arguments by parameter
        name; ``done``: it returned ``result`` (else it raised or its caller
        was cancelled, and may or may not have written). Here: nothing."""

    def _by_name(self, name: str, method: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
        signature = self._signatures.get(name)
        if signature is None:
            signature = self._signatures[name] = inspect.signature(method)
        try:
            return dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:  # the call itself says what is wrong with it
            return dict(kwargs)

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
                if self.failing:
                    self._fail_if_failing(name, self._by_name(name, attr, args, kwargs))
                writes = not name.startswith(("get_", "list_"))
                if writes:
                    self.writes += 1
                self._interleaver.outside_work_started()
                result, done = None, False
                try:
                    result = await attr(*args, **kwargs)
                    done = True
                    return result
                finally:
                    if writes:
                        self.written(name, self._by_name(name, attr, args, kwargs), result, done)
                    self._interleaver.outside_work_finished()

        return serialised

    def _fail_if_failing(self, name: str, arguments: dict[str, Any]) -> None:
        session_id = arguments.get("session_id")
        if session_id in self.failing:
            self.fired[session_id] += 1
            raise InjectedStorageFault(f"injected fault: storage {name} for session {session_id}")

"""What went wrong in a story that the story did not ask for, and which
sessions the faults it did ask for touched.

A fault a rule armed excuses a session only once it fires (a failed bus
operation on the session's key, a failing model turn served to its agent,
a failed storage call naming the session).
An exception that ends a task, or reaches the loop's exception handler,
fails the story unless it is (or was caused by) an injected fault: nobody
else reads those exceptions, and agentscope's logger is silenced.
"""
from __future__ import annotations

import asyncio

from fakes.model import ScriptBook, ScriptedModelError
from harness.kernel.controlled_bus import ControlledBus, InjectedBusFault
from harness.kernel.controlled_storage import InjectedStorageFault, SerialStorage
from harness.kernel.interleaver import Interleaver


class FailureWatch:
    """Watches one story's tasks, loop and injected faults."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        interleaver: Interleaver,
        bus: ControlledBus,
        book: ScriptBook,
        storage: SerialStorage,
    ) -> None:
        self._loop = loop
        self._storage = storage
        self._interleaver = interleaver
        self._bus = bus
        self._book = book
        self._loop_errors: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: self._loop_errors.append(context))

    def faulted_sessions(self, sessions: dict[str, str], lease_faults: list[str]) -> set[str]:
        """Aliases (of ``sessions``, alias to id) an injected fault touched
        (``lease_faults``: keys whose lease renewal or release failed)."""
        keys = [op.key for op in self._bus.fired] + list(lease_faults)
        touched = {
            alias
            for key in keys
            for alias, session_id in sessions.items()
            if session_id in key
        }
        failed = {alias for alias, session_id in sessions.items() if self._storage.fired[session_id]}
        return touched | failed | {alias for alias in sessions if alias in self._book.failed}

    def unexpected(self) -> list[str]:
        """Exceptions no rule injected, since the last call, one line each."""
        found = [
            f"task {record.label} ended with {type(error).__name__}: {error}"
            for record, error in self._interleaver.failures()
            if not injected(error)
        ]
        found += [
            f"the event loop reported: {context.get('message')}"
            + (
                f" ({type(context['exception']).__name__}: {context['exception']})"
                if context.get("exception") else ""
            )
            for context in self._loop_errors
            if not injected(context.get("exception"))
        ]
        self._loop_errors.clear()
        return found

    def close(self) -> None:
        """Hand the loop's exception handler back."""
        self._loop.set_exception_handler(None)


def injected(error: BaseException | None) -> bool:
    """Whether ``error`` (or what caused it) is a fault a rule injected."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (InjectedBusFault, InjectedStorageFault, ScriptedModelError)):
            return True
        error = error.__cause__ or error.__context__
    return False

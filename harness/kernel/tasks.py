"""What the interleaver knows of each task, and of the operation it is
held at; and the wait of a task whose process died."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass


async def never_again() -> None:
    """Wait for ever, as a task of a dead process does; once the harness
    cancels it (closing the story), every later wait ends at once, so its
    ``finally`` blocks unwind instead of waiting again."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    await asyncio.get_running_loop().create_future()


@dataclass(frozen=True)
class Op:
    """A bus operation a task is about to perform."""

    name: str
    key: str

    def __str__(self) -> str:
        return f"{self.name} {self.key}"


class ControlledTask:
    """Bookkeeping for one task under control."""

    def __init__(
        self,
        task: asyncio.Task,
        index: int,
        qualname: str,
        parent: "ControlledTask | None",
    ) -> None:
        self.task = task
        self.index = index
        self.qualname = qualname
        self.parent = parent
        self.label: str | None = None
        #: The process (node) the task runs in: its parent's, or the one
        #: being set up when it was created.
        self.node: int = parent.node if parent is not None else 0
        self.pending: Op | None = None
        self.gate: asyncio.Future | None = None

    @property
    def held(self) -> bool:
        """Stopped at a switch point, waiting to be released. (A *held*
        task; "parked" is kept for sessions waiting for their user.)"""
        return self.gate is not None and not self.task.done()

    @property
    def done(self) -> bool:
        return self.task.done()

    def __repr__(self) -> str:
        where = f" at {self.pending}" if self.held else ""
        return f"<{self.label}{where}>"

"""A virtual clock for the confirming scripts that drive agentscope's
dispatchers alone: minutes of backoff and leases pass in no wall time."""
from __future__ import annotations

import asyncio
import selectors


class JumpingLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to its next timer when nothing else
    can run."""

    def __init__(self) -> None:
        self.now = 0.0
        loop = self

        class Selector(selectors.DefaultSelector):
            def select(self, timeout=None):
                ready = super().select(0)
                if not ready and timeout:
                    loop.now += timeout
                return ready

        super().__init__(selector=Selector())

    def time(self) -> float:
        return self.now

"""What the confirming scripts that drive agentscope's dispatchers alone
(without ``_app.py``) share: a virtual clock, so minutes of backoff and
leases pass in no wall time, and the exit codes of ``_app.run_script``."""
from __future__ import annotations

import asyncio
import selectors
import sys
import traceback
from collections.abc import Callable


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


def exit_with(main: Callable[[], int]) -> None:
    """Run ``main`` and exit with its code; a failure of the script itself
    exits 3 with its cause, so that exit 1 always means confirmed."""
    try:
        code = main()
    except Exception as failed:  # noqa: BLE001 - the script's own failure, not the finding
        traceback.print_exc()
        print(f"ERROR (exit 3): the script itself failed: {type(failed).__name__}: {failed}")
        code = 3
    sys.exit(code)

'''Let a graceful shutdown hand back the triggers its wake-up dispatcher
holds, instead of dropping them.

The bug F14 (every release 2.0.7–2.0.11; I7, I5): the app's lifespan exit
(every rolling upgrade) runs ``WakeupDispatcher.__aexit__``, which cancels
the dispatcher's loop and its backoff timers. What the loop had drained
from the trigger queue and not yet dispatched (the rest of its batch, or,
over Redis, a drain whose reply the cancel lost) and what a timer held
until its backoff ran out are gone: a confirmation the user gave (HTTP
200) is never applied, the card still shows after the restart, and a
payload's ``wake`` leaves it waiting in the inbox with nothing to wake it.

The fix: the dispatcher marks itself stopping before it cancels anything;
a batch runs in a task of its own that a cancel of the loop does not cut
short and that the stopping dispatcher waits for; a stopping batch
dispatches nothing more and pushes what it drained back on the queue; a
backoff timer cancelled by the stop queues its trigger at once. Whichever
process drains next (another node, or this one restarted) dispatches
them. Cost: one task per drain; on a stop, one ``queue_push`` per trigger
handed back and one ``publish``.
'''
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

_COMMON = dict(
    name="shutdown-keeps-triggers",
    module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher",
    targets=TARGET_RELEASES,
    covers=("I16",),
    what="a graceful shutdown hands the triggers its dispatcher holds back to the queue",
)

RETRY_TASKS = """\
        self._retry_tasks: set[asyncio.Task] = set()
"""

RETRY_TASKS_AND_BATCHES = """\
        self._retry_tasks: set[asyncio.Task] = set()
        # Batches being dispatched, which a stop waits for; once stopping,
        # they hand what they drained back to the queue.
        self._batches: set[asyncio.Task] = set()
        self._stopping = False
"""

EXIT = '''\
        """Cancel the dispatcher loop and any pending retries."""
'''

EXIT_STOPPING = '''\
        """Cancel the dispatcher loop and any pending retries, handing
        back to the queue every trigger a batch or a retry still holds."""
        self._stopping = True
        await asyncio.gather(*self._batches, return_exceptions=True)
'''

DRAIN = """\
    async def _drain_and_dispatch(self) -> None:
"""

DRAIN_IN_A_BATCH = '''\
    async def _drain_and_dispatch(self) -> None:
        """Drain and dispatch one batch in a task of its own: a cancel of
        the loop (a shutdown) does not cut it short, and a stopping
        dispatcher waits for it."""
        if self._stopping:
            return
        batch = asyncio.create_task(self._dispatch_batch())
        self._batches.add(batch)
        batch.add_done_callback(self._batches.discard)
        await asyncio.shield(batch)

    async def _hand_back(self, entries: list[dict]) -> None:
        """Push drained trigger entries back on the queue and signal, for
        whichever process drains next.

        Args:
            entries (`list[dict]`):
                The queue entries, as drained.
        """
        for payload in entries:
            await self._bus.queue_push(MessageBusKeys.wakeup_queue(), payload)
        if entries:
            await self._bus.publish(MessageBusKeys.wakeup_signal(), {})

    async def _dispatch_batch(self) -> None:
'''

EACH = """\
        for payload in entries:
"""

EACH_UNLESS_STOPPING = """\
        for n, payload in enumerate(entries):
            if self._stopping:
                await self._hand_back(entries[n:])
                return
"""

RETRY_SLEEP = """\
                await asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)
"""

RETRY_SLEEP_UNLESS_STOPPING = """\
                try:
                    await asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)
                except asyncio.CancelledError:
                    # A stopping dispatcher cancels its timers: queue the
                    # trigger now rather than drop it.
                    if not self._stopping:
                        raise
"""

PATCHES = (
    SourcePatch(method="__init__", before=RETRY_TASKS, after=RETRY_TASKS_AND_BATCHES, **_COMMON),
    SourcePatch(method="__aexit__", before=EXIT, after=EXIT_STOPPING, **_COMMON),
    SourcePatch(
        method="_drain_and_dispatch", before=DRAIN, after=DRAIN_IN_A_BATCH,
        more=((EACH, EACH_UNLESS_STOPPING),), **_COMMON,
    ),
    SourcePatch(method="_schedule_retry", before=RETRY_SLEEP, after=RETRY_SLEEP_UNLESS_STOPPING, **_COMMON),
)

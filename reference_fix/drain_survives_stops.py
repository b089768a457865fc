"""Keep what a run drained from its inbox when a stop cuts the drain short.

The bug (F11's mechanism, every release 2.0.7–2.0.11; I5): a run drains
its session's inbox in two places. ``InboxMiddleware.on_reasoning`` drains
it before each reasoning step and puts the entries into the agent's
context; the turn tail's ``has_pending_inbox_or_release`` drains it and
pushes everything back, to see whether the run must go around again. Over
Redis a drain is one script that reads and deletes. A user's stop whose
cancel lands while a drain's reply is read (or, in the turn tail, before
the push-back is done) leaves the delete applied and the reply lost: the
payloads (a team member's message, a background job's result) are gone
from the inbox and never reach the context.

The fix: each drain runs in a task of its own, awaited however many
cancels land meanwhile, then the first cancel is re-raised: the reasoning
step's entries are in the context by then (saved with the run's state,
whatever cancelled it), and the turn tail's are back in the inbox, with the
registration released only when the check released it. Cost: one task per
reasoning step and per turn tail; no bus operation.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose ``on_reasoning`` has the texts below.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

DRAIN = """\
        entries = await self._bus.queue_drain(
            MessageBusKeys.inbox(agent.state.session_id),
            max_count=self._max_count,
        )
"""

DRAIN_SHIELDED = """\
        # In a task of its own, awaited however many cancels land: a cancel
        # cutting the reply short would lose the entries the bus removed.
        drain = asyncio.ensure_future(
            self._bus.queue_drain(
                MessageBusKeys.inbox(agent.state.session_id),
                max_count=self._max_count,
            ),
        )
        cancelled = None
        while not drain.done():
            try:
                await asyncio.shield(drain)
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        entries = drain.result()
"""

REASON = """\
        async for evt in next_handler(**input_kwargs):
"""

REASON_UNLESS_CANCELLED = """\
        if cancelled is not None:
            # The drained entries are in the context; now stop.
            raise cancelled

        async for evt in next_handler(**input_kwargs):
"""

CHECK = """\
                    if not await has_pending_inbox_or_release(
                        self._message_bus,
                        session_id,
                    ):
                        released = True
                        break
"""

CHECK_SHIELDED = """\
                    # In a task of its own, awaited however many cancels
                    # land: a cancel between its drain and its push-back
                    # would lose what it drained.
                    check = asyncio.ensure_future(
                        has_pending_inbox_or_release(
                            self._message_bus,
                            session_id,
                        ),
                    )
                    cancelled = None
                    while not check.done():
                        try:
                            await asyncio.shield(check)
                        except asyncio.CancelledError as exc:
                            cancelled = cancelled or exc
                    released = not check.result()
                    if cancelled is not None:
                        raise cancelled
                    if released:
                        break
"""

_COMMON = dict(
    name="drain-survives-stops",
    targets=TARGET_RELEASES,
    covers=("I5",),
    what="a stop cutting an inbox drain short keeps what it drained",
)

PATCHES = (
    SourcePatch(
        module="agentscope.app.middleware._inbox_middleware",
        cls="InboxMiddleware",
        method="on_reasoning",
        before=DRAIN,
        after=DRAIN_SHIELDED,
        more=((REASON, REASON_UNLESS_CANCELLED),),
        imports=("asyncio",),
        **_COMMON,
    ),
    SourcePatch(
        module="agentscope.app._service._chat",
        cls="ChatService",
        method="_run_impl",
        before=CHECK,
        after=CHECK_SHIELDED,
        **_COMMON,
    ),
)

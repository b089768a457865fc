"""Keep ``WakeupDispatcher``'s loop alive when one dispatch fails.

The bug (every release 2.0.7–2.0.11): ``_drain_and_dispatch`` awaits
``_dispatch_one`` for each drained trigger with no guard, and
``_dispatch_one``'s own bus and storage calls (``is_locked``,
``get_session``, the orphan ``REPLY_END`` publish) are unguarded too. One
failed call — a dropped Redis connection — ends the loop ("WakeupDispatcher
loop crashed; subscription ended.") for the life of the process, and the
rest of the drained batch is lost with it: from then on no wake-up, resume
or channel message of that process is ever dispatched (I13, and I11 for the
payloads left waiting).

The fix: a dispatch that raises is logged and its trigger put back on the
queue after the dispatcher's usual backoff, and the loop goes on with the
rest of the batch.
"""
from __future__ import annotations

from .source_patch import SourcePatch

UNGUARDED = """\
            # Entries from older producers omit ``kind`` — treat as wake.
            kind = payload.get("kind", MessageBusKeys.WAKEUP_KIND_WAKE)
            await self._dispatch_one(
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                kind=kind,
                raw_input=payload.get("input"),
            )
"""

GUARDED = """\
            # Entries from older producers omit ``kind`` — treat as wake.
            kind = payload.get("kind", MessageBusKeys.WAKEUP_KIND_WAKE)
            try:
                await self._dispatch_one(
                    user_id=user_id,
                    session_id=session_id,
                    agent_id=agent_id,
                    kind=kind,
                    raw_input=payload.get("input"),
                )
            except Exception:  # pylint: disable=broad-except
                # One failed bus or storage call must neither end the
                # loop nor drop the trigger: put it back and go on.
                logger.exception(
                    "WakeupDispatcher: dispatching %s for session %s "
                    "failed; re-queued.",
                    kind,
                    session_id,
                )
                self._requeue_after_failure(payload)

    def _requeue_after_failure(self, payload: dict) -> None:
        \"\"\"Put a trigger whose dispatch failed back on the queue after
        the usual backoff (a detached task, like ``_schedule_retry``).\"\"\"

        async def _retry() -> None:
            try:
                await asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)
                await self._bus.queue_push(
                    MessageBusKeys.wakeup_queue(),
                    payload,
                )
                await self._bus.publish(MessageBusKeys.wakeup_signal(), {})
            except asyncio.CancelledError:
                pass
            except Exception:  # pylint: disable=broad-except
                logger.exception(
                    "WakeupDispatcher: failed to re-queue a trigger for "
                    "session %s.",
                    payload.get("session_id"),
                )

        task = asyncio.create_task(
            _retry(),
            name=f"{payload.get('kind', 'wake')}-retry:{payload.get('session_id')}",
        )
        self._retry_tasks.add(task)
        task.add_done_callback(self._retry_tasks.discard)
"""

PATCH = SourcePatch(
    name="dispatcher-survival",
    module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher",
    method="_drain_and_dispatch",
    before=UNGUARDED,
    after=GUARDED,
    targets=("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11"),
    covers=("I13",),
    what="a failed dispatch is re-queued instead of ending the dispatcher's loop",
)

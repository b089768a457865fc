"""Keep ``WakeupDispatcher``'s loop alive when one dispatch fails, and
retry the failed trigger a bounded number of times.

The bug (every release 2.0.7–2.0.11): ``_drain_and_dispatch`` awaits
``_dispatch_one`` for each drained trigger with no guard, and
``_dispatch_one``'s own bus and storage calls (``is_locked``,
``get_session``, the orphan ``REPLY_END`` publish) are unguarded too. One
failed call — a dropped Redis connection — ends the loop ("WakeupDispatcher
loop crashed; subscription ended.") for the life of the process, and the
rest of the drained batch is lost with it: from then on no wake-up, resume
or channel message of that process is ever dispatched (I13, and I11 for the
payloads left waiting).

The fix: a dispatch that raises is caught, the loop goes on with the rest
of the batch, and the trigger is pushed back on the queue after a backoff:
:data:`BASE_DELAY` (the dispatcher's own ``_RESUME_RETRY_BACKOFF_SECS``)
after the first failure, doubling up to :data:`MAX_DELAY`. After
:data:`MAX_ATTEMPTS` failed dispatches the trigger is given up: an error is
logged (kind, session, agent, user, attempts, the last traceback) and the
entry is pushed, without a signal, to a dead-letter queue beside the
trigger queue (``agentscope:wakeups`` + :data:`DEAD_LETTER_SUFFIX`, a
sliding TTL of :data:`DEAD_LETTER_TTL_SECS`), where an operator can read it
and push it back. A storage error that stays on one session (its
``get_session`` raising every time) so costs :data:`MAX_ATTEMPTS` dispatches
over :func:`give_up_after` seconds, not one every 0.1 s for ever, each of
which published the wake-up signal to every process; further ``wake``
triggers for that session that fail while one is waiting out its backoff
in this process are coalesced into it (a ``wake`` carries no input), so
deliveries to a broken session do not multiply the retries.

Where the attempts live: on the queue entry itself, as
``dispatch_attempts`` (absent on a fresh trigger). The count so follows the
trigger to whichever process drains it next, and needs no store of its
own. Its cost: the retried entry is one field larger; a dispatcher without
the fix ignores the field (and retries as it always did); and the count
only survives the failure path: a retry that then finds the session locked
goes through agentscope's ``_schedule_retry``, which rebuilds the entry
without it. While a retry waits out its backoff it lives only in the
memory of the process that failed it (a detached task, as
``_schedule_retry``'s lock-held retries always have): a process that dies
or shuts down in that window loses it, and that window is now up to
:data:`MAX_DELAY` long instead of 0.1 s.

Cost on the normal path (a dispatch that succeeds): none, no bus
operation and no field is added. Per failed dispatch: one ``queue_push``
and one ``publish`` of the wake-up signal; per trigger given up: one
``queue_push`` (with its ``EXPIRE``) to the dead-letter queue.

Upstream: agentscope-ai/agentscope pull request #2682 ("fix(app): bound
wakeup retries while a session lock is held", fixes #2677) works in the
same direction on a neighbouring path. As its description says, it
coalesces the *lock-held* ``wake``/``resume`` retries to one timer per
``(kind, session_id)``, backs them off exponentially with jitter to a 60 s
deadline carried on the entry (``retry_attempt``/``retry_started_at``), and
keeps the loop alive when one entry fails to dispatch, logging the failure
and going on. This fix differs: it does not touch the lock-held path
(``_schedule_retry`` is left as released); a dispatch that raises is not
only survived but retried, so a passing failure (a Redis failover) loses no
trigger; the bound is a count of failed attempts rather than a deadline,
without jitter; and what is given up is recorded in a dead-letter queue,
not only in the log. The two compose: #2682's counter and deadline are
fields of their own on the entry.

The dead-letter key is built inline from ``MessageBusKeys.wakeup_queue()``.
Upstream it belongs in ``MessageBusKeys`` as a builder of its own
(``wakeup_dead_letters()``); a :class:`SourcePatch` changes methods of one
class and cannot add a classmethod to another module's class.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: The first retry's delay, in seconds: agentscope's
#: ``_RESUME_RETRY_BACKOFF_SECS`` (the patch reads that constant).
BASE_DELAY = 0.1

#: The longest delay between two attempts, in seconds.
MAX_DELAY = 10.0

#: Failed dispatches after which a trigger is given up.
MAX_ATTEMPTS = 10

#: The dead-letter queue's key: the trigger queue's and this.
DEAD_LETTER_SUFFIX = ":dead"

#: The dead-letter queue's sliding TTL (a week; the patch writes it as
#: ``7 * 24 * 3600``).
DEAD_LETTER_TTL_SECS = 7 * 24 * 3600


def delays() -> list[float]:
    """The backoff after each failed attempt but the last (which gives
    the trigger up)."""
    return [min(BASE_DELAY * 2 ** (n - 1), MAX_DELAY) for n in range(1, MAX_ATTEMPTS)]


def give_up_after() -> float:
    """Seconds from a trigger's first failed dispatch to its last."""
    return sum(delays())


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

GUARDED = f'''\
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
                # loop nor drop the trigger: retry it, a bounded number
                # of times, and go on with the batch.
                self._requeue_after_failure(payload)

    def _requeue_after_failure(self, payload: dict) -> None:
        """Retry a trigger whose dispatch raised, or give it up.

        Called from the ``except`` block of the failed dispatch (it logs
        that exception). The entry goes back on the queue after a backoff
        from ``_RESUME_RETRY_BACKOFF_SECS`` doubling up to {MAX_DELAY:g} s,
        counting its failed attempts in ``dispatch_attempts``. After
        {MAX_ATTEMPTS} failed attempts it is given up: logged as an error
        and moved to the dead-letter queue beside the trigger queue (no
        signal: nothing drains it but an operator). A ``wake`` for a
        session whose ``wake`` already waits out its backoff here is
        dropped: it carries nothing the pending one does not.

        Args:
            payload (`dict`):
                The queue entry whose dispatch failed.
        """
        kind = payload.get("kind", MessageBusKeys.WAKEUP_KIND_WAKE)
        session_id = payload.get("session_id")
        name = f"{{kind}}-dispatch-retry:{{session_id}}"
        if kind == MessageBusKeys.WAKEUP_KIND_WAKE and any(
            task.get_name() == name and not task.done()
            for task in self._retry_tasks
        ):
            # A wake carries no input, and one is already on its way back
            # for this session: coalesce (as upstream #2682 does with the
            # lock-held retries).
            return
        attempts = int(payload.get("dispatch_attempts", 0)) + 1
        entry = {{**payload, "dispatch_attempts": attempts}}
        given_up = attempts >= {MAX_ATTEMPTS}
        if given_up:
            key = MessageBusKeys.wakeup_queue() + "{DEAD_LETTER_SUFFIX}"
            delay = 0.0
            logger.error(
                "WakeupDispatcher: giving up on %s trigger for session %s "
                "(agent %s, user %s) after %d failed dispatch attempts; "
                "moved to %s.",
                kind,
                session_id,
                payload.get("agent_id"),
                payload.get("user_id"),
                attempts,
                key,
                exc_info=True,
            )
        else:
            key = MessageBusKeys.wakeup_queue()
            delay = min(
                _RESUME_RETRY_BACKOFF_SECS * 2 ** (attempts - 1),
                {MAX_DELAY!r},
            )
            logger.warning(
                "WakeupDispatcher: dispatching %s trigger for session %s "
                "failed (attempt %d of %d); retrying in %.1f s.",
                kind,
                session_id,
                attempts,
                {MAX_ATTEMPTS},
                delay,
                exc_info=attempts == 1,
            )

        async def _push() -> None:
            try:
                if given_up:
                    await self._bus.queue_push(
                        key,
                        entry,
                        ttl_secs=7 * 24 * 3600,
                    )
                    return
                await asyncio.sleep(delay)
                await self._bus.queue_push(key, entry)
                await self._bus.publish(MessageBusKeys.wakeup_signal(), {{}})
            except asyncio.CancelledError:
                pass
            except Exception:  # pylint: disable=broad-except
                logger.exception(
                    "WakeupDispatcher: failed to push the %s trigger for "
                    "session %s to %s.",
                    kind,
                    session_id,
                    key,
                )

        task = asyncio.create_task(_push(), name=name)
        self._retry_tasks.add(task)
        task.add_done_callback(self._retry_tasks.discard)
'''

PATCH = SourcePatch(
    name="dispatcher-survival",
    module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher",
    method="_drain_and_dispatch",
    before=UNGUARDED,
    after=GUARDED,
    targets=("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11"),
    covers=("I13",),
    what=(
        "a failed dispatch is retried with capped backoff, then given up to a dead-letter queue,"
        " instead of ending the dispatcher's loop"
    ),
)

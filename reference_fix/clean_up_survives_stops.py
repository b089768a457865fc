"""Let a run's clean-up finish however many cancels land in it.

The bugs (every release 2.0.7–2.0.11), in the ``finally`` of
``ChatService._run_impl``, which hands the inbox registration back and
saves the run's replies and state:

- F8 (I5): a stop lands at ``await asyncio.shield(persist_task)``; the
  ``except`` branch then awaits ``persist_task`` unshielded, and a second
  stop cancels ``_persist`` part-way. Or the second stop lands in
  ``abandon_inbox_consumer``, which runs before the shielded persistence
  and so skips it. Either way what the run consumed from its inbox is
  lost.
- F10 (I7): one stop lands in ``abandon_inbox_consumer`` of a parked run:
  nothing is saved, not even the call it parked on, so the user's
  confirmation later ends in ``ReplyEnd(ERROR)``.
- F8 again (I3, I5), before the clean-up: a stop lands in the run's
  ``register_inbox_consumer``, which comes before the ``try`` whose
  ``finally`` hands the registration back. The registration (often
  written: the write went out before the cancel) is left behind, and what
  a producer then deferred to it waits in the inbox.

The fix: the registration moves inside that ``try``, the hand-back runs
inside the shielded persistence task, and the run waits for that task
however many cancels land meanwhile, then re-raises the first of them.
Whatever cancelled the run (a user's stop, a session delete, a shutdown),
the state is saved before the session lock is released. Nothing changes
on the normal path but one task (the hand-back moves into the persistence
task).
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose ``_run_impl`` has the texts below.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

REGISTER_BEFORE = """\
            await register_inbox_consumer(self._message_bus, session_id)
            try:
"""

REGISTER_AFTER = """\
            try:
                # Inside the ``try``: a cancel landing in it still hands
                # the registration back below.
                await register_inbox_consumer(self._message_bus, session_id)
"""

ABANDON_BEFORE = """\
                if not released:
                    await abandon_inbox_consumer(
                        self._message_bus,
                        user_id=user_id,
                        session_id=session_id,
                        agent_id=agent_id,
                    )
"""

ABANDON_AFTER = """\
                # Started here, awaited inside the shielded persistence
                # below: a cancel landing in it must not skip the save.
                abandon_task = (
                    asyncio.create_task(
                        abandon_inbox_consumer(
                            self._message_bus,
                            user_id=user_id,
                            session_id=session_id,
                            agent_id=agent_id,
                        ),
                    )
                    if not released
                    else None
                )
"""

PERSIST_BEFORE = """\
                persist_task = asyncio.create_task(_persist())
                try:
                    await asyncio.shield(persist_task)
                except asyncio.CancelledError:
                    # Await the shielded task so the lock is only
                    # released after storage is consistent, then
                    # propagate to honour asyncio semantics.
                    await persist_task
                    raise
"""

PERSIST_AFTER = """\
                async def _hand_back_then_persist() -> None:
                    try:
                        if abandon_task is not None:
                            await abandon_task
                    finally:
                        await _persist()

                persist_task = asyncio.create_task(_hand_back_then_persist())
                # However many cancels land meanwhile, the lock is only
                # released after storage is consistent; the first one is
                # then propagated to honour asyncio semantics.
                cancelled = None
                while not persist_task.done():
                    try:
                        await asyncio.shield(persist_task)
                    except asyncio.CancelledError as exc:
                        cancelled = cancelled or exc
                persist_task.result()
                if cancelled is not None:
                    raise cancelled
"""

PATCH = SourcePatch(
    name="clean-up-survives-stops",
    module="agentscope.app._service._chat",
    cls="ChatService",
    method="_run_impl",
    before=ABANDON_BEFORE,
    after=ABANDON_AFTER,
    more=((PERSIST_BEFORE, PERSIST_AFTER), (REGISTER_BEFORE, REGISTER_AFTER)),
    targets=TARGET_RELEASES,
    covers=("I5", "I7"),
    what="a run's clean-up (inbox hand-back, saving its state) finishes however many cancels land in it",
)

"""Let a stop that lands in a run's turn tail or clean-up end the reply.

The bugs (every release 2.0.7–2.0.11), all in ``ChatService._run_impl``
after the agent's generator has finished, where no agent code sees a
cancel:

- F3 (I9): the run parked on a confirmation or an external result and is
  finishing its turn tail when the user presses stop. The cancel lands in
  the tail; the run saves its state and ends. Nobody closes the parked
  reply: no ``ReplyEnd(INTERRUPTED)``, the card stays, the stop did
  nothing.
- F8 (I5): a second stop lands in ``abandon_inbox_consumer``, which runs
  before the shielded persistence. The persistence is skipped, so what the
  run consumed from its inbox is lost.
- F10 (I7): one stop lands there in a parked run: nothing is saved, not
  even the call it parked on, so the user's confirmation later ends in
  ``ReplyEnd(ERROR)`` and the call never runs.

The fix, two parts:

1. The clean-up cannot be cut short: the consumer hand-back runs inside
   the shielded persistence task, and the run waits for that task however
   many stops land meanwhile (a stop that landed there is re-raised once
   the state is saved).
2. A stop that reached the run after the agent parked ends the parked
   reply the way ``ChatService.interrupt`` does for a session no run
   holds: it queues a ``resume`` trigger carrying a
   ``UserInterruptEvent``. The next run (after this one releases the
   session lock) closes the parked calls and publishes
   ``ReplyEnd(INTERRUPTED)``. A shutdown cancel is treated the same way,
   as a cancel landing mid-answer already is.

Cost: one task and one trigger per stop; nothing on the normal path.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose ``_run_impl`` has the texts below; from 2.0.8 on,
#: it also names a session created from the UI after the reply is saved.
TARGET_RELEASES = ("2.0.8", "2.0.9", "2.0.10", "2.0.11")
WITHOUT_NAMING = ("2.0.7", "2.0.7.post1")

FLAG_BEFORE = """\
            released = False
"""

FLAG_AFTER = """\
            released = False
            # Whether a stop (a cancel of this run) reached the run itself;
            # a parked reply it reached is ended by a ``resume`` trigger.
            stopped = False
            stop_queued = False

            async def _stop_parked_reply() -> None:
                nonlocal stop_queued
                if stop_queued or not agent.state.has_awaiting_tool_calls(
                    agent.name,
                ):
                    return
                stop_queued = True
                await asyncio.shield(
                    enqueue_run_trigger(
                        self._message_bus,
                        user_id=user_id,
                        session_id=session_id,
                        agent_id=agent_id,
                        kind=MessageBusKeys.WAKEUP_KIND_RESUME,
                        inputs=UserInterruptEvent(
                            reply_id=agent.state.reply_id,
                        ),
                    ),
                )
"""

TAIL_BEFORE = """\
                    input_msg = None

            finally:
"""

TAIL_AFTER = """\
                    input_msg = None

            except asyncio.CancelledError:
                stopped = True
                raise
            finally:
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
                # below: a stop landing in it must not skip the save.
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
                # However many stops land meanwhile, the lock is only
                # released after storage is consistent.
                stop_landed = False
                while not persist_task.done():
                    try:
                        await asyncio.shield(persist_task)
                    except asyncio.CancelledError:
                        stop_landed = True
                persist_task.result()
                if stopped or stop_landed:
                    await _stop_parked_reply()
                if stop_landed:
                    # Propagate to honour asyncio semantics.
                    raise asyncio.CancelledError
"""

AUTO_NAME_BEFORE = """\
                await self._auto_name_session(
                    user_id,
                    agent_id,
                    session_record,
                    model,
                    trigger_text,
                )
"""

AUTO_NAME_AFTER = """\
                try:
                    await self._auto_name_session(
                        user_id,
                        agent_id,
                        session_record,
                        model,
                        trigger_text,
                    )
                except asyncio.CancelledError:
                    # A stop during the naming model call, after parking.
                    await _stop_parked_reply()
                    raise
"""

_EDITS = ((TAIL_BEFORE, TAIL_AFTER), (ABANDON_BEFORE, ABANDON_AFTER), (PERSIST_BEFORE, PERSIST_AFTER))
_COMMON = dict(
    module="agentscope.app._service._chat",
    cls="ChatService",
    method="_run_impl",
    before=FLAG_BEFORE,
    after=FLAG_AFTER,
    covers=("I5", "I7", "I9"),
    what="a run's clean-up survives stops, and a stop after parking ends the parked reply",
)

PATCH = SourcePatch(
    name="stops-in-turn-tail",
    more=(*_EDITS, (AUTO_NAME_BEFORE, AUTO_NAME_AFTER)),
    targets=TARGET_RELEASES,
    **_COMMON,
)

#: The same for 2.0.7, which names no session.
PATCH_WITHOUT_NAMING = SourcePatch(
    name="stops-in-turn-tail",
    more=_EDITS,
    targets=WITHOUT_NAMING,
    **_COMMON,
)

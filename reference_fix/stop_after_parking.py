'''End a parked reply when the user's stop reaches its run after it parked.

The bug F3 (I9; every release 2.0.7–2.0.11): a run parks on a confirmation
or an external result, and the user presses stop while the run finishes
its turn tail (the inbox check) or, from 2.0.8 on, names a UI-created
session. The cancel lands in ``ChatService._run_impl`` after the agent's
generator has finished, where no agent code sees it: the run saves its
state and ends, nobody closes the parked reply, the card stays and the
stop did nothing.

The fix, in three parts:

1. The user's stop is marked: ``CancelDispatcher._interrupt_session``
   cancels with the message ``"user interrupt"``, and the two places in
   ``_run_impl`` that re-arm a cancel for the agent keep that message. A
   session delete (``_cancel_session``) and a shutdown
   (``ChatRunRegistry.__aexit__``) cancel without it.
2. Where such a stop reaches a parked run (the turn tail, the naming
   call), the reply is ended the way :meth:`ChatService.interrupt` ends
   one no run holds: a ``resume`` trigger carrying a
   ``UserInterruptEvent``, taken by the next run once this one releases
   the session lock.
3. Any other cancel leaves the parked reply as it is: after a shutdown
   and a restart, or a delete, the card is not taken for a stop.

Upstream would name the message once, as a constant of the cancel
dispatcher's module; a runtime patch changes methods only, so it is
spelled in both. Cost: nothing on the normal path; on a user's stop after
parking, one trigger.

It holds I9 on its own; with ``clean-up-survives-stops`` a second cancel
cannot cut the clean-up short either (F8, F10).
'''
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose code has the texts below; from 2.0.8 on, the run
#: also names a session created from the UI after the reply is saved.
TARGET_RELEASES = ("2.0.8", "2.0.9", "2.0.10", "2.0.11")
WITHOUT_NAMING = ("2.0.7", "2.0.7.post1")
ALL_RELEASES = WITHOUT_NAMING + TARGET_RELEASES

# ── 1. the interrupt route marks its cancel ───────────────────────────

UNMARKED = """\
                "CancelDispatcher: interrupting local chat run for "
                "session %s",
                session_id,
            )
            task.cancel()
"""

MARKED = """\
                "CancelDispatcher: interrupting local chat run for "
                "session %s",
                session_id,
            )
            # The message tells the run this is the user's stop, not a
            # session delete or a shutdown.
            task.cancel("user interrupt")
"""

MARK = SourcePatch(
    name="stop-after-parking",
    module="agentscope.app._manager._cancel_dispatcher",
    cls="CancelDispatcher",
    method="_interrupt_session",
    before=UNMARKED,
    after=MARKED,
    targets=ALL_RELEASES,
    covers=("I9",),
    what="a user's stop after the run parked ends the parked reply; a shutdown or a delete does not",
)

# ── 2. the run keeps the mark and acts on it once parked ──────────────

REARM_A_BEFORE = """\
                                except asyncio.CancelledError:
                                    # Interrupt landed here, not at
"""
REARM_A_AFTER = """\
                                except asyncio.CancelledError as exc:
                                    # Interrupt landed here, not at
"""
REARM_B_BEFORE = """\
                                except asyncio.CancelledError:
                                    # See Case A: redirect an interrupt
"""
REARM_B_AFTER = """\
                                except asyncio.CancelledError as exc:
                                    # See Case A: redirect an interrupt
"""
REARM_BEFORE = """\
                                        current.cancel()
"""
REARM_AFTER = """\
                                        current.cancel(*exc.args)
"""

TAIL_BEFORE = """\
                    input_msg = None

            finally:
"""

TAIL_AFTER = """\
                    input_msg = None

            except asyncio.CancelledError as exc:
                await self._end_parked_reply_on_stop(
                    exc,
                    user_id,
                    session_id,
                    agent_id,
                    agent,
                )
                raise
            finally:
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
                except asyncio.CancelledError as exc:
                    await self._end_parked_reply_on_stop(
                        exc,
                        user_id,
                        session_id,
                        agent_id,
                        agent,
                    )
                    raise
"""


# ── 3. what ends the parked reply, beside ``interrupt`` ───────────────

INTERRUPT_END = """\
            inputs=UserInterruptEvent(reply_id=session.state.reply_id),
        )
"""

INTERRUPT_END_AND_HELPER = INTERRUPT_END + '''
    async def _end_parked_reply_on_stop(
        self,
        stop: asyncio.CancelledError,
        user_id: str,
        session_id: str,
        agent_id: str,
        agent: Agent,
    ) -> None:
        """End the parked reply of a run the user's stop reached after the
        agent parked, as :meth:`interrupt` does for a session no run
        holds: no agent code runs any more to see the cancel. Any other
        cancel (a shutdown, a session delete) leaves the reply parked and
        answerable.

        Args:
            stop (`asyncio.CancelledError`):
                The cancel that reached the run.
            user_id (`str`):
                The owner user id.
            session_id (`str`):
                The run's session id.
            agent_id (`str`):
                The run's agent id.
            agent (`Agent`):
                The run's agent.
        """
        if stop.args != ("user interrupt",):
            return
        if not agent.state.has_awaiting_tool_calls(agent.name):
            return
        await asyncio.shield(
            enqueue_run_trigger(
                self._message_bus,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                kind=MessageBusKeys.WAKEUP_KIND_RESUME,
                inputs=UserInterruptEvent(reply_id=agent.state.reply_id),
            ),
        )
'''

_RUN = dict(
    name="stop-after-parking",
    module="agentscope.app._service._chat",
    cls="ChatService",
    covers=("I9",),
    what=MARK.what,
)

#: The helper, after ``interrupt``, whose way of ending a reply it shares.
HELPER = SourcePatch(
    method="interrupt",
    before=INTERRUPT_END,
    after=INTERRUPT_END_AND_HELPER,
    targets=ALL_RELEASES,
    **_RUN,
)

_REARM = (
    (REARM_A_BEFORE, REARM_A_AFTER),
    (REARM_BEFORE, REARM_AFTER),
    (REARM_B_BEFORE, REARM_B_AFTER),
    (REARM_BEFORE, REARM_AFTER),
)

RUN = SourcePatch(
    method="_run_impl",
    before=TAIL_BEFORE,
    after=TAIL_AFTER,
    more=(*_REARM, (AUTO_NAME_BEFORE, AUTO_NAME_AFTER)),
    targets=TARGET_RELEASES,
    **_RUN,
)

#: The same for 2.0.7, which names no session.
RUN_WITHOUT_NAMING = SourcePatch(
    method="_run_impl",
    before=TAIL_BEFORE,
    after=TAIL_AFTER,
    more=_REARM,
    targets=WITHOUT_NAMING,
    **_RUN,
)

PATCHES = (MARK, HELPER, RUN, RUN_WITHOUT_NAMING)

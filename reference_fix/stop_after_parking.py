'''End a parked reply when the user's stop reaches its run after it parked.

The bug F3 (I9; every release 2.0.7–2.0.11): a run parks on a confirmation
or an external result, and the user presses stop while the run finishes
its turn tail (the inbox check) or, from 2.0.8 on, names a UI-created
session. The cancel lands in ``ChatService._run_impl`` after the agent's
generator has finished, where no agent code sees it: the run saves its
state and ends, nobody closes the parked reply, the card stays and the
stop did nothing.

A stop that lands in the run's clean-up (the wait for the saving of its
state) or, once the agent parked, anywhere else outside the agent's
generator is lost the same way.

The fix, in three parts:

1. The user's stop is marked: ``CancelDispatcher._interrupt_session``
   cancels with the message ``"user interrupt"``, and the two places in
   ``_run_impl`` that re-arm a cancel for the agent keep that message. A
   session delete (``_cancel_session``) and a shutdown
   (``ChatRunRegistry.__aexit__``) cancel without it.
2. ``ChatService.run``, the one place every cancel that no agent code
   handled comes out of ``_run_impl`` (the agent ends a reply on a stop
   mid-answer and swallows the cancel), hands such a stop over, once the
   run has saved its state and released the session: when the stored
   reply still awaits a call, it queues what :meth:`ChatService.interrupt`
   queues for a session no run holds, a ``resume`` carrying a
   ``UserInterruptEvent``. One place, so one hand-over per stop, wherever
   it landed (turn tail, clean-up, naming call), and the caught
   ``CancelledError`` is raised again. The call gets a ``try`` of its
   own: an error of the hand-over is logged as the run's, and another
   cancel goes on to the ``except`` that handles it (a shutdown's, with
   ``shutdown-keeps-triggers``).
3. Any other cancel leaves the parked reply as it is: after a shutdown
   and a restart, or a delete, the card is not taken for a stop.

Upstream would name the message once, as a constant of the cancel
dispatcher's module; a runtime patch changes methods only, so it is
spelled in both. Cost: nothing on the normal path, nor on a stop the agent
handles; on a stop that reached no agent code, two storage reads (the
session, the agent's name) and, when the reply is parked, one trigger.

It holds I9 on its own; with ``clean-up-survives-stops`` a second cancel
cannot cut the clean-up short either (F8, F10).
'''
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose code has the texts below; ``run`` calls
#: ``_run_impl`` on one line up to 2.0.8, on several from 2.0.9 on.
ONE_LINE_CALL = ("2.0.7", "2.0.7.post1", "2.0.8")
SOP_CALL = ("2.0.9", "2.0.10", "2.0.11")
ALL_RELEASES = ONE_LINE_CALL + SOP_CALL

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

# ── 2. the run keeps the mark where it re-arms a cancel ───────────────

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

# ── 2b. a stop for a reply that awaits nothing is dropped ─────────────

UNPARKED_BEFORE = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
"""

UNPARKED_AFTER = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
                # A stop for a reply that awaits nothing (it ended, or an
                # earlier stop ended it) has nothing to close: resumed, it
                # would open a reply it never ends.
                stopped = isinstance(input_msg, UserInterruptEvent)
                if stopped and not agent.state.has_awaiting_tool_calls(
                    agent.name,
                ):
                    return
"""


# ── 3. ``run`` hands over a stop that reached no agent code ───────────

# The call is wrapped in a ``try`` of its own: an error of the hand-over is
# then logged as the run's (the ``except Exception`` below), and a cancel
# that is not the user's stop goes on to whatever handles it there.
CALL_BEFORE = """\
        try:
            await self._run_impl(user_id, session_id, agent_id, input_msg)
"""

#: From 2.0.9 on the call spans several lines (and passes ``sop_dispatch``).
CALL_SOP_BEFORE = """\
        try:
            await self._run_impl(
                user_id,
                session_id,
                agent_id,
                input_msg,
                sop_dispatch,
            )
"""

HAND_OVER = """\
            except asyncio.CancelledError as exc:
                # The user's stop, where no agent code saw it (turn tail,
                # clean-up, naming call): end a reply still parked as
                # ``interrupt`` does. A failed hand-over is logged below.
                if exc.args == ("user interrupt",):
                    await asyncio.shield(
                        self._end_parked_reply_on_stop(
                            user_id,
                            session_id,
                            agent_id,
                        ),
                    )
                raise
"""


def _wrapped(call: str) -> str:
    """``run``'s ``try`` around ``call`` (its text, as released), with
    the call in a ``try`` of its own that hands the stop over."""
    head, body = call.split("\n", 1)
    indented = "".join("    " + line for line in body.splitlines(keepends=True))
    return f"{head}\n            try:\n{indented}{HAND_OVER}"


CALL_AFTER = _wrapped(CALL_BEFORE)
CALL_SOP_AFTER = _wrapped(CALL_SOP_BEFORE)


# ── 4. what ends the parked reply, beside ``interrupt`` ───────────────

INTERRUPT = """\
    async def interrupt(
"""

HELPER_AND_INTERRUPT = '''\
    async def _end_parked_reply_on_stop(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> None:
        """End the parked reply of a run the user's stop reached where no
        agent code saw it (the turn tail, the clean-up, the naming call),
        as :meth:`interrupt` does for a session no run holds: a ``resume``
        carrying a :class:`UserInterruptEvent`. Called once the run is
        over, so the state it reads is the one the run saved. A reply the
        agent ended (a stop mid-answer) no longer awaits a call: nothing
        is queued.

        Args:
            user_id (`str`):
                The owner user id.
            session_id (`str`):
                The run's session id.
            agent_id (`str`):
                The run's agent id.
        """
        session = await self._storage.get_session(
            user_id,
            agent_id,
            session_id,
        )
        if session is None:
            return
        agent_record = await self._access.resolve_agent(user_id, agent_id)
        if not session.state.has_awaiting_tool_calls(agent_record.data.name):
            return
        await enqueue_run_trigger(
            self._message_bus,
            user_id=user_id,
            session_id=session_id,
            agent_id=agent_id,
            kind=MessageBusKeys.WAKEUP_KIND_RESUME,
            inputs=UserInterruptEvent(reply_id=session.state.reply_id),
        )

''' + INTERRUPT

_SERVICE = dict(
    name="stop-after-parking",
    module="agentscope.app._service._chat",
    cls="ChatService",
    covers=("I9",),
    what=MARK.what,
)

#: The helper, before ``interrupt``, whose way of ending a reply it shares.
HELPER = SourcePatch(
    method="interrupt",
    before=INTERRUPT,
    after=HELPER_AND_INTERRUPT,
    targets=ALL_RELEASES,
    **_SERVICE,
)

#: The re-armed cancels keep the user's mark; a stop with nothing to
#: close is dropped.
REARM = SourcePatch(
    method="_run_impl",
    before=REARM_A_BEFORE,
    after=REARM_A_AFTER,
    more=(
        (REARM_BEFORE, REARM_AFTER),
        (REARM_B_BEFORE, REARM_B_AFTER),
        (REARM_BEFORE, REARM_AFTER),
        (UNPARKED_BEFORE, UNPARKED_AFTER),
    ),
    targets=ALL_RELEASES,
    **_SERVICE,
)

#: ``run`` hands the stop over (2.0.7, 2.0.8: the call on one line).
RUN = SourcePatch(
    method="run",
    before=CALL_BEFORE,
    after=CALL_AFTER,
    targets=ONE_LINE_CALL,
    **_SERVICE,
)

#: The same from 2.0.9 on.
RUN_WITH_SOP = SourcePatch(
    method="run",
    before=CALL_SOP_BEFORE,
    after=CALL_SOP_AFTER,
    targets=SOP_CALL,
    **_SERVICE,
)

PATCHES = (MARK, HELPER, REARM, RUN, RUN_WITH_SOP)

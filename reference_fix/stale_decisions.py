"""Drop a decision whose tool call no longer awaits one.

The bug (F16, every release 2.0.7–2.0.11): a user's confirmation (or an
external result) whose call was closed before its resume ran — a stop
closed it while the resume waited behind the session lock, or a second
tab answered a stale card — reaches ``Agent._check_incoming_event`` in a
later run, which raises ``ValueError`` ("Agent is not waiting for user
confirmation"). By then the agent may be parked on another call of a new
reply, and ``_run_impl``'s Case B closes *that* reply with
``ReplyEnd(ERROR)``; its call stays awaiting, and when it is answered the
same reply ends a second time (I1).

The fix: once the agent is loaded under the session lock, a decision for
a call that is not among the agent's awaiting ones is logged and dropped,
as ``_skip_parked_wakeup`` drops a wake-up it cannot run. It changes
nothing: the call it decides was already closed. A run triggered by a
message or a wake-up pays one ``isinstance``. Upstream PR #2779 refuses
stale decisions at the web UI's routes; this guards every way a decision
reaches a run (a route, a channel card, the queue behind the lock).
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose ``_run_impl`` has the text below.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

UNCHECKED = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
"""

CHECKED = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
                # A decision for a call that no longer awaits one (a stop
                # closed it before this resume ran, or another tab
                # answered it) fails ``Agent._check_incoming_event``, which
                # would end the reply the agent is parked on now. The call
                # it decides is closed already: drop it.
                if isinstance(
                    input_msg,
                    (UserConfirmResultEvent, ExternalExecutionResultEvent),
                ):
                    decided = (
                        {_.tool_call.id for _ in input_msg.confirm_results}
                        if isinstance(input_msg, UserConfirmResultEvent)
                        else {_.id for _ in input_msg.execution_results}
                    )
                    stale = decided - {
                        _.id
                        for _ in agent.state.get_awaiting_tool_calls(
                            agent.name,
                        )
                    }
                    if stale:
                        logger.warning(
                            "Dropping a decision for session %s: tool "
                            "call(s) %s no longer await one.",
                            session_id,
                            sorted(stale),
                        )
                        return
"""

PATCH = SourcePatch(
    name="stale-decisions",
    module="agentscope.app._service._chat",
    cls="ChatService",
    method="_run_impl",
    before=UNCHECKED,
    after=CHECKED,
    targets=TARGET_RELEASES,
    covers=("I1",),
    what="a decision for a tool call that no longer awaits one is dropped, not failed into the current reply",
)

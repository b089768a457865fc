"""Completion: what the user started ends as the user said (I7, I9, I10, I12)."""
from __future__ import annotations

from harness.world.cast import TEAM_OF
from harness.world.marks import FAILURE_REMINDER_MARK
from harness.world.surface import ABSENT, LEADER_REMINDER
from harness.world.observation import REQUEST_EVENTS, Observation

from ..ledger import Ledger, ended_by_interrupt
from ..violation import Broken
from .words import is_error_end, markers_in


def decided_calls_complete(obs: Observation, ledger: Ledger) -> None:
    """I7: once settled, every call the user decided on has left the
    awaiting state and its reply has ended normally (or INTERRUPTED, after
    the user interrupted it).

    Protects confirm/resume, the half of the HITL flow the user sees."""
    if not obs.settled:
        return
    for alias, call_ids in ledger.decisions.items():
        view = obs.sessions.get(alias)
        if view is None or alias in ledger.faults:
            continue
        stuck = sorted(set(call_ids) & set(view.awaiting_call_ids))
        unresolved = [c for c in call_ids if c not in view.resolved_call_ids]
        if stuck or unresolved:
            raise Broken(
                f"{alias}'s decided calls {call_ids} complete with a result",
                f"still awaiting {stuck}; no result for {unresolved}",
            )
        last_end = view.last_reply_end()
        if last_end == "interrupted" and ended_by_interrupt(view, ledger):
            continue
        if view.parked_status == "idle" and last_end not in (
            None,
            "completed",
            "exceed_max_iters",
        ):
            raise Broken(
                f"{alias}'s resumed reply ends normally",
                f"it ended {last_end}",
            )


def interrupt_not_lost(obs: Observation, ledger: Ledger) -> None:
    """I9: once settled, every interrupt the user sent while its session
    was parked or had a reply in progress has ended that reply: the session
    no longer awaits the calls it was parked on, and a ReplyEnd(INTERRUPTED)
    of that reply was published after the interrupt. An interrupt with no
    reply to end (an idle session) may do nothing, and one whose calls the
    user answered afterwards races that answer.

    Protects the user's stop button: an interrupt agentscope accepted (HTTP
    202) must not be silently dropped."""
    if not obs.settled:
        return
    for sent in ledger.interrupts:
        view = obs.sessions.get(sent.alias)
        if view is None or not sent.has_target or ledger.answered_after(sent):
            continue
        stuck = [c for c in sent.parked_on if c in view.awaiting_call_ids]
        ends = view.reply_ends(sent.mark)
        honoured = any(
            end.get("finished_reason") == "interrupted"
            and (sent.reply_id is None or end.get("reply_id") == sent.reply_id)
            for _, end in ends
        )
        if stuck or not honoured:
            moment = (
                f"parked on {list(sent.parked_on)}"
                if sent.parked_on
                else f"with reply {sent.reply_id} in progress"
            )
            after = [
                f"{e.get('reply_id')}:{e.get('finished_reason')}" for _, e in ends
            ]
            raise Broken(
                f"the interrupt sent to {sent.alias} ({moment}) ends that "
                "reply: ReplyEnd(INTERRUPTED), no call left awaiting",
                f"{sent.alias} is {view.parked_status}"
                + (f", still awaiting {stuck}" if stuck else "")
                + f"; reply ends published after the interrupt: {after or 'none'}",
            )


def failures_reported_once(obs: Observation, ledger: Ledger) -> None:
    """I10: once settled, every reply ends exactly once, and a leader hears
    of each failed reply of its worker exactly once.

    A failing model call is an expected fault: the user must see the reply
    end (with ERROR) once, not twice and not never, and the leader must be
    told once so it neither waits forever nor re-dispatches the task twice.
    A reply still parked on a tool call has not ended yet, and one whose
    process crashed never will (twice is still wrong); nor will a crashed
    member's reminder."""
    if not obs.settled:
        return
    for view in obs.sessions.values():
        starts = [e.get("reply_id") for e in view.events if e.get("type") == "REPLY_START"]
        ends = [e.get("reply_id") for e in view.events if e.get("type") == "REPLY_END"]
        asks = [e.get("reply_id") for e in view.events if e.get("type") in REQUEST_EVENTS]
        parked_reply = asks[-1] if asks and view.parked_status != "idle" else None
        for reply_id in dict.fromkeys(starts):
            count = ends.count(reply_id)
            if count == 1 or (count == 0 and reply_id == parked_reply):
                continue
            if count == 0 and view.alias in ledger.crashed:
                continue  # its process died mid-reply: nobody is left to end it
            if count == 0 and view.alias in ledger.faults:
                continue  # a fault touched it (storage that fails cannot store its end)
            raise Broken(
                f"reply {reply_id} of {view.alias} ends exactly once",
                f"it ended {count} times ({view.parked_status})",
            )
    for leader in obs.sessions.values():
        members = [m for m, led_by in TEAM_OF.items() if led_by == leader.alias]
        if not members or LEADER_REMINDER in ABSENT:  # the catalog says this part is left out
            continue
        failures = {
            member: sum(1 for e in obs.sessions[member].events if is_error_end(e))
            for member in members
            if member in obs.sessions
        }
        failed = sum(failures.values())
        # A member whose process died after its reply ended can no longer
        # tell (the reminder goes out in its run's clean-up): at most once.
        untold = sum(n for member, n in failures.items() if member in ledger.crashed)
        # What the leader was told: the reminders in its context, and those
        # still queued for it (a parked leader reads them after its resume).
        # Not the pushes: agentscope's turn tail drains and pushes back.
        told = sum(FAILURE_REMINDER_MARK in h for h in leader.context_hints) + sum(
            FAILURE_REMINDER_MARK in h for h in markers_in(leader.queued)
        )
        if not failed - untold <= told <= failed:
            raise Broken(
                f"the {leader.alias} is told of each of its members' {failed} "
                "failed replies exactly once",
                f"the {leader.alias} got {told} failure reminder(s)",
            )


def calls_run_as_answered(obs: Observation, ledger: Ledger) -> None:
    """I12: once settled, every call the user confirmed ran exactly once
    and every call the user denied never ran.

    With several calls waiting in one turn the user answers them one at a
    time: each answer must apply to its own call only, whatever arrives in
    between. A stop the user pressed on that call, before or after
    confirming it, may keep it from running."""
    if not obs.settled:
        return
    for alias, answers in ledger.confirmations.items():
        view = obs.sessions.get(alias)
        if view is None or alias in ledger.faults:
            continue  # a fault that touched the session may fail its resume
        for call_id, note, confirmed in answers:
            runs = view.tool_runs.count(note)
            if runs == (1 if confirmed else 0):
                continue
            if runs == 0 and (
                ledger.interrupted_since_answer(alias, call_id)
                or any(call_id in sent.parked_on for sent in ledger.interrupts_of(alias))
            ):
                continue  # the user stopped the reply (before or after answering)
            raise Broken(
                f"{alias}'s call {call_id} ({note!r}), "
                f"{'confirmed' if confirmed else 'denied'} by the user, runs "
                f"{'exactly once' if confirmed else 'never'}",
                f"it ran {runs} time(s); {alias} is {view.parked_status}",
            )

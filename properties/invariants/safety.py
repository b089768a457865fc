"""Safety: nothing happens that should not (I1, I2, I3, I4, I6, I16)."""
from __future__ import annotations

import re

from harness.world.cast import TEAM_OF
from harness.world.marks import REMINDER_MARK
from harness.world.observation import Observation

from ..ledger import Ledger, ended_by_interrupt
from ..violation import Broken
from .words import excerpt, is_error_end

#: The member a team reminder is about (agentscope writes its name quoted).
_MEMBER = re.compile(r"Team member '([^']+)'")


def no_error_reply_without_fault(obs: Observation, ledger: Ledger) -> None:
    """I1: a reply ends with ERROR only when a rule injected a fault.

    Protects against the reported bug: a parked run re-entering its loop
    with no input and publishing a spurious ``ReplyEnd(ERROR)``."""
    for view in obs.sessions.values():
        errors = [e for e in view.events if is_error_end(e)]
        if errors and view.alias not in ledger.faults:
            detail = errors[0].get("error") or {}
            raise Broken(
                f"no reply of {view.alias} ends with ERROR (no fault was "
                "injected)",
                f"{len(errors)} ReplyEnd(ERROR) published for {view.alias}, carrying "
                f"agentscope's own error: {detail.get('type', '?')}: \"{detail.get('message', '')}\"",
            )


def no_spurious_leader_reminder(obs: Observation, ledger: Ledger) -> None:
    """I2: a leader hears "member failed" (or "was interrupted") only about
    a member whose reply a fault really broke (or the user interrupted).

    A false reminder makes the leader answer a failure report for a worker
    that is merely waiting for its user."""
    for view in obs.sessions.values():
        for push in view.inbox_pushes:
            hint = str(push.get("hint"))
            if REMINDER_MARK not in hint:
                continue
            named = _MEMBER.search(hint)
            member = named.group(1) if named else "?"
            member_view = obs.sessions.get(member)
            if TEAM_OF.get(member) == view.alias and (
                member in ledger.faults
                or (member_view is not None and ended_by_interrupt(member_view, ledger))
            ):
                continue
            raise Broken(
                f"no reminder about {member} in {view.alias}'s inbox (not its "
                f"member, or no fault touched {member} and nobody interrupted it)",
                f"reminder: {excerpt(hint)}",
            )


def no_dangling_inbox_consumer(obs: Observation, ledger: Ledger) -> None:
    """I3: an inbox consumer registration never outlives its session's runs.

    A dangling registration makes every producer skip the wake-up, so the
    session's inbox is never drained (until the lease runs out). A session
    a fault touched (a crashed run, a failed bus operation) may keep its
    registration until the lease runs out: I11 checks what happens then."""
    for view in obs.sessions.values():
        if view.consumer_registered and not view.run_alive and view.alias not in ledger.faults:
            raise Broken(
                f"{view.alias}'s inbox consumer registration is released "
                "when its last run ends",
                f"{view.alias} has no live run but its inbox is still "
                "registered as consumed",
            )


def parked_stays_parked(
    before: Observation | None,
    obs: Observation,
    ledger: Ledger,
) -> None:
    """I4: a parked session stays parked until its decision is applied.

    ``before`` holds each session's last observation while parked with no
    run alive (:class:`LastParked`), however many steps ago: a session
    seen parked may later be seen with no run alive and those calls no
    longer awaited only if the user answered one of them (a confirmation,
    a denial or an external result), or interrupted it and a reply ended
    INTERRUPTED since. A session deleted since is not compared with the new
    one opened under its alias."""
    if before is None:
        return
    for alias, then in before.sessions.items():
        now = obs.sessions.get(alias)
        if now is None or now.run_alive or now.session_id != then.session_id:
            continue
        left = [c for c in then.awaiting_call_ids if c not in now.awaiting_call_ids]
        if not left:
            continue
        answered = set(ledger.decisions.get(alias, [])) & set(then.awaiting_call_ids)
        if not answered and not ended_by_interrupt(now, ledger, since=len(then.events)):
            raise Broken(
                f"{alias} stays {then.parked_status} until the user answers "
                f"{then.awaiting_call_ids}",
                f"{alias} became {now.parked_status} with none of them answered "
                f"(and no interrupt ended the reply); no longer awaited: {left}",
            )


class LastParked:
    """Each session's last observation while parked with no run alive:
    what I4 compares every later observation with."""

    def __init__(self) -> None:
        self._views: dict = {}

    def before(self) -> Observation | None:
        return Observation(sessions=dict(self._views)) if self._views else None

    def update(self, obs: Observation) -> None:
        for alias, view in obs.sessions.items():
            if view.run_alive:
                continue
            if view.parked_status != "idle":
                self._views[alias] = view
            else:
                self._views.pop(alias, None)


def one_run_per_session(obs: Observation, ledger: Ledger) -> None:
    """I6: never two runs of one session inside its lock at once."""
    del ledger
    for view in obs.sessions.values():
        if len(view.lock_holders) > 1:
            raise Broken(
                f"at most one task holds {view.alias}'s session lock",
                f"held by {sorted(view.lock_holders)}",
            )


def parked_card_survives_restart(obs: Observation, ledger: Ledger) -> None:
    """I16: a node's graceful shutdown and restart (a rolling upgrade) is
    never taken for the user's stop: once settled, a call whose card showed
    as the shutdown began still awaits its user, and no reply of its session
    has ended INTERRUPTED since, unless the user answered the call or
    pressed stop on it (before the restart, or in that session since).

    Protects the confirmation card across every upgrade: the user comes
    back to a card they can still answer (I7 then holds the answer's resume
    to completion)."""
    if not obs.settled:
        return
    for n, restart in enumerate(ledger.restarts, 1):
        for alias, calls in restart.parked.items():
            view = obs.sessions.get(alias)
            if view is None or alias in ledger.faults:
                continue
            stopped = {c for sent in ledger.interrupts_of(alias) for c in sent.parked_on}
            if len(ledger.interrupts_of(alias)) > restart.stops.get(alias, 0) or stopped & set(calls):
                continue  # the user's own stop, before or since, may end it
            decided = set(ledger.decisions.get(alias, []))
            gone = [c for c in calls if c not in decided and c not in view.awaiting_call_ids]
            ended = [
                e.get("reply_id") for _, e in view.reply_ends(restart.marks.get(alias, 0))
                if e.get("finished_reason") == "interrupted"
            ]
            if gone or ended:
                raise Broken(
                    f"{alias}'s card ({', '.join(calls)}) survives restart {n} of a node: "
                    "still awaited, its reply not ended, until the user answers or stops it",
                    f"{alias} is {view.parked_status}"
                    + (f", no longer awaiting {gone}" if gone else "")
                    + (f"; replies ended INTERRUPTED with no stop pressed: {ended}" if ended else ""),
                )

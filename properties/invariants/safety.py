"""Safety: nothing happens that should not (I1, I2, I3, I4, I6)."""
from __future__ import annotations

from harness.world.observation import Observation
from harness.world.cast import TEAM_OF
from harness.world.surface import REMINDER_MARK

from ..ledger import Ledger, ended_by_interrupt
from ..violation import Broken
from .words import excerpt, is_error_end


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
                f"{len(errors)} ReplyEnd(ERROR) published for {view.alias}: "
                f"{detail.get('type', '?')}: {detail.get('message', '')}",
            )


def no_spurious_leader_reminder(obs: Observation, ledger: Ledger) -> None:
    """I2: a leader hears "member failed" only when one of its members failed.

    A false reminder makes the leader answer a failure report for a worker
    that is merely waiting for its user."""
    for view in obs.sessions.values():
        reminders = [
            p for p in view.inbox_pushes if REMINDER_MARK in str(p.get("hint"))
        ]
        if not reminders:
            continue
        faulty_workers = {m for m in ledger.faults if TEAM_OF.get(m) == view.alias}
        if not faulty_workers:
            raise Broken(
                f"no failure reminder in {view.alias}'s inbox (no worker "
                "failed)",
                f"{len(reminders)} reminder(s): "
                f"{excerpt(str(reminders[0].get('hint')))}",
            )


def no_dangling_inbox_consumer(obs: Observation, ledger: Ledger) -> None:
    """I3: an inbox consumer registration never outlives its session's runs.

    A dangling registration makes every producer skip the wake-up, so the
    session's inbox is never drained (until the lease runs out)."""
    del ledger
    for view in obs.sessions.values():
        if view.consumer_registered and not view.run_alive:
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

    Compares two quiescent observations: a session seen parked (and idle)
    earlier may only be unparked now if the user answered one of the calls
    it was parked on (a confirmation, a denial or an external result), or
    interrupted it and a reply ended INTERRUPTED in between."""
    if before is None:
        return
    for alias, then in before.sessions.items():
        now = obs.sessions.get(alias)
        if now is None or then.run_alive or now.run_alive:
            continue
        if then.parked_status == "idle" or now.parked_status == then.parked_status:
            continue
        answered = set(ledger.decisions.get(alias, [])) & set(then.awaiting_call_ids)
        if not answered and not ended_by_interrupt(now, ledger, since=len(then.events)):
            raise Broken(
                f"{alias} stays {then.parked_status} until the user answers "
                f"{then.awaiting_call_ids}",
                f"{alias} became {now.parked_status} with none of them answered "
                "(and no interrupt ended the reply)",
            )


def one_run_per_session(obs: Observation, ledger: Ledger) -> None:
    """I6: never two runs of one session inside its lock at once."""
    del ledger
    for view in obs.sessions.values():
        if len(view.lock_holders) > 1:
            raise Broken(
                f"at most one task holds {view.alias}'s session lock",
                f"held by {sorted(view.lock_holders)}",
            )

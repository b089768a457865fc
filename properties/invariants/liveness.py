"""Liveness: nothing waits forever, the dispatcher keeps going (I11, I13)."""
from __future__ import annotations

from harness.world.observation import Observation

from ..ledger import Ledger
from ..violation import Broken
from .words import excerpt, markers_in


def nothing_waits_forever(obs: Observation, ledger: Ledger) -> None:
    """I11: once settled past every lease, no session is still locked or
    registered as consumed without a run, and no payload waits in the inbox
    of a session that is not parked (nothing would ever consume it).

    Liveness after failures: a crashed run's lock and consumer registration
    must stop blocking once their leases expire, and what was delivered to
    the session meanwhile must then reach its agent. A parked session's
    inbox rightly waits for the resume, and one whose storage fails every
    call has nothing that could consume it."""
    if not obs.past_leases:
        return
    for view in obs.sessions.values():
        crashed = " (its run's process crashed)" if view.alias in ledger.crashed else ""
        if not view.run_alive and (view.lock_leased or view.consumer_registered):
            raise Broken(
                f"with no run alive, {view.alias}'s session lock and inbox "
                "registration have expired",
                f"still {'locked' if view.lock_leased else ''}"
                f"{' and ' if view.lock_leased and view.consumer_registered else ''}"
                f"{'registered as consumed' if view.consumer_registered else ''}{crashed}",
            )
        if view.parked_status != "idle" or view.run_alive or not view.queued:
            continue
        if view.alias in ledger.broken_storage:
            continue  # nothing can consume it: its storage fails every call
        raise Broken(
            f"{view.alias}'s inbox is consumed once the world settles past "
            "every lease",
            f"{len(view.queued)} payload(s) still queued in {view.alias}'s "
            f"inbox with no run or wake-up pending{crashed}: "
            + "; ".join(excerpt(m, 80) for m in markers_in(view.queued)),
        )


def dispatcher_survives(obs: Observation, ledger: Ledger) -> None:
    """I13: the wake-up dispatcher keeps running whatever one bus operation
    does.

    It is the only party that turns queued triggers into runs: once its
    loop ends, every later wake-up, resume and channel message of the
    process waits in the queue for good."""
    if not obs.dispatcher_alive:
        faults = ", ".join(sorted(ledger.faults)) or "none"
        raise Broken(
            "agentscope's WakeupDispatcher loop is still running",
            f"its loop has ended (sessions with injected faults: {faults})",
        )


def work_is_bounded(obs: Observation, ledger: Ledger) -> None:
    """I17: the world comes to rest with bounded work: a trigger that
    cannot be dispatched, a session woken again and again, a retry that
    multiplies itself never makes settling play more bus operations than a
    base budget plus a bounded number per virtual second, each per process
    (:data:`harness.kernel.interleaver.BUSY_RATE`), repeat itself with
    nothing due to change it, or stay busy past the settling horizon.

    Protects the bus and every other session from one trigger's storm, and
    the search from a story that would play until a time limit: such a
    world is reported within seconds, with its story."""
    if ledger.restless:
        raise Broken(
            "settling plays a bounded number of bus operations per virtual second",
            ledger.restless[0],
        )


def deleted_sessions_left_alone(obs: Observation, ledger: Ledger) -> None:
    """I18: once settled, a session the user deleted is gone and stays
    gone: no record in storage, no run, no lock, no inbox registration,
    nothing queued in its inbox; a cancel the delete made is never taken
    for the user's stop (nothing resumes it).

    agentscope's delete route promises it: "Permanently delete a session
    and all its associated state", cancelling the run in flight first."""
    del ledger
    if not obs.settled:
        return
    for view in obs.deleted:
        left = [
            what for what, there in (
                ("its stored record", view.stored),
                ("a live run", view.run_alive),
                ("its session lock", view.lock_leased),
                ("its inbox registration", view.consumer_registered),
                (f"{len(view.queued)} queued payload(s)", bool(view.queued)),
            ) if there
        ]
        if left:
            raise Broken(
                f"{view.alias}'s deleted session ({view.session_id}) leaves nothing behind",
                "still there: " + ", ".join(left),
            )

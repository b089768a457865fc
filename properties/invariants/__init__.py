"""The invariants, each a small function of an
:class:`~harness.world.observation.Observation` and the
:class:`~properties.ledger.Ledger` (I4: of two observations).

They are plain functions, grouped by what they protect, so that tests can
feed them a deliberately broken world and watch them fire. Each raises
:class:`~properties.violation.Broken`; :mod:`properties.catalog` says which
property each one is.
"""
from .completion import (
    calls_run_as_answered,
    decided_calls_complete,
    failures_reported_once,
    interrupt_not_lost,
)
from .delivery import (
    accepted_messages_stay_the_users,
    background_results_delivered,
    parked_messages_reach_the_agent,
    payloads_delivered_once_in_order,
    refused_only_while_busy,
    refusals_tell_the_truth,
)
from .liveness import (
    deleted_sessions_left_alone,
    dispatcher_survives,
    nothing_waits_forever,
    work_is_bounded,
)
from .safety import (
    no_dangling_inbox_consumer,
    no_error_reply_without_fault,
    no_spurious_leader_reminder,
    one_run_per_session,
    parked_card_survives_restart,
    parked_stays_parked,
)

__all__ = [
    "accepted_messages_stay_the_users",
    "background_results_delivered",
    "calls_run_as_answered",
    "decided_calls_complete",
    "deleted_sessions_left_alone",
    "dispatcher_survives",
    "failures_reported_once",
    "interrupt_not_lost",
    "no_dangling_inbox_consumer",
    "no_error_reply_without_fault",
    "no_spurious_leader_reminder",
    "nothing_waits_forever",
    "one_run_per_session",
    "parked_card_survives_restart",
    "parked_messages_reach_the_agent",
    "parked_stays_parked",
    "payloads_delivered_once_in_order",
    "refused_only_while_busy",
    "refusals_tell_the_truth",
    "work_is_bounded",
]

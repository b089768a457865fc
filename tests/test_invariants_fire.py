"""Every invariant can fail: each is fed a deliberately broken world.

Two kinds of broken world. Where the breakage can be made with the real
app (a consumer registration left behind, a payload pushed past the
hand-off protocol, an error reply published, a false reminder sent), the
test builds a real :class:`ControlledWorld`, breaks it through the bus, and
checks the invariant against what the harness observes. Where it would take
a broken agentscope (a parked session silently unparked, a decided call
that never completes, two runs inside one lock), the test builds the
observation by hand. Each test also shows the invariant silent on the same
world unbroken, so a check that always fires would fail here too.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from agentscope.app._bus_ops import publish_session_event
from agentscope.app.message_bus import MessageBusKeys
from agentscope.event import ReplyEndEvent, ReplyFinishedReason
from agentscope.message import HintBlock

from harness.world.marks import REMINDER_MARK
from harness.world.observation import Observation, SessionView
from properties import invariants as inv
from properties.catalog import BY_CODE, PROPERTIES
from properties.invariants.safety import LastParked
from properties.ledger import Interrupt, Ledger, Restart
from properties.violation import InvariantViolated
from properties.machine import HitlMachine, machine_enforcing
from properties.story.playback import playing


@pytest.fixture
def machine():
    machine = HitlMachine()
    yield machine
    machine.world.close()


def _fires(code: str, check, *args) -> InvariantViolated:
    """``check`` is property ``code``'s, and it fires on ``args``."""
    assert BY_CODE[code].check is check
    with pytest.raises(InvariantViolated) as caught:
        BY_CODE[code].verify(*args)
    assert caught.value.code == code
    return caught.value


def _hint(text: str) -> dict:
    return HintBlock(hint=text, source=json.dumps({"label": "test"})).model_dump(mode="json")


# ── I1 ────────────────────────────────────────────────────────────────


def test_I1_fires_on_an_error_reply_nobody_caused(machine):
    solo = machine.world.sessions["solo"]
    inv.no_error_reply_without_fault(machine.world.observe(), machine.ledger)
    end = ReplyEndEvent(
        session_id=solo,
        reply_id="r1",
        finished_reason=ReplyFinishedReason.ERROR,
    )
    machine.world.setup(publish_session_event(machine.world.bus, solo, end.model_dump(mode="json")))
    violation = _fires("I1", inv.no_error_reply_without_fault, machine.world.observe(), machine.ledger)
    assert "solo" in violation.actual
    machine.ledger.faults.add("solo")  # an injected fault explains it
    inv.no_error_reply_without_fault(machine.world.observe(), machine.ledger)


# ── I2 ────────────────────────────────────────────────────────────────


def test_I2_fires_on_a_failure_reminder_for_a_healthy_worker(machine):
    leader = machine.world.sessions["leader"]
    reminder = _hint(f"{REMINDER_MARK} 'worker' hit an error while running")
    machine.world.setup(machine.world.bus.queue_push(MessageBusKeys.inbox(leader), reminder))
    _fires("I2", inv.no_spurious_leader_reminder, machine.world.observe(), machine.ledger)
    machine.ledger.faults.add("worker")
    inv.no_spurious_leader_reminder(machine.world.observe(), machine.ledger)


def test_I2_fires_on_a_reminder_about_another_teams_member():
    """A failure in the chief's team explains no reminder to the leader."""
    reminder = _hint(f"{REMINDER_MARK} 'aide' hit an error while running")
    leader = SessionView("leader", "l", inbox_pushes=[reminder])
    _fires("I2", inv.no_spurious_leader_reminder, Observation({"leader": leader}), Ledger(faults={"aide"}))
    chief = SessionView("chief", "c", inbox_pushes=[reminder])
    inv.no_spurious_leader_reminder(Observation({"chief": chief}), Ledger(faults={"aide"}))


# ── I3 ────────────────────────────────────────────────────────────────


def test_I3_fires_on_a_registration_left_behind_by_a_finished_run(machine):
    solo = machine.world.sessions["solo"]
    inv.no_dangling_inbox_consumer(machine.world.observe(), machine.ledger)
    machine.world.setup(
        machine.world.bus.registry_set(
            MessageBusKeys.inbox_consumer(solo),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
            "1",
            ttl_secs=MessageBusKeys.SESSION_RUN_TTL_SECS,
        ),
    )
    violation = _fires("I3", inv.no_dangling_inbox_consumer, machine.world.observe(), machine.ledger)
    assert "solo" in violation.expected


# ── I4 ────────────────────────────────────────────────────────────────


def _seen(status: str, awaiting=("call-1",)) -> Observation:
    view = SessionView("worker", "w", parked_status=status, awaiting_call_ids=list(awaiting))
    return Observation({"worker": view})


def test_I4_fires_when_a_parked_session_unparks_without_an_answer():
    before = _seen("awaiting_permission")
    unanswered = Ledger()
    _fires("I4", inv.parked_stays_parked, before, _seen("idle", ()), unanswered)
    other_call = Ledger(decisions={"worker": ["call-2"]})
    _fires("I4", inv.parked_stays_parked, before, _seen("idle", ()), other_call)
    inv.parked_stays_parked(before, _seen("awaiting_permission"), unanswered)
    answered = Ledger(decisions={"worker": ["call-1"]})
    inv.parked_stays_parked(before, _seen("idle", ()), answered)


def test_I4_accepts_unparking_by_an_interrupt_the_user_sent():
    before = _seen("awaiting_permission")
    interrupted = _seen("idle", ())
    interrupted.sessions["worker"].events = [_end("interrupted")]
    _fires("I4", inv.parked_stays_parked, before, interrupted, Ledger())  # nobody interrupted
    sent = Ledger(interrupts=[Interrupt("worker", mark=0, parked_on=("call-1",))])
    inv.parked_stays_parked(before, interrupted, sent)
    completed = _seen("idle", ())
    completed.sessions["worker"].events = [_end("completed")]
    _fires("I4", inv.parked_stays_parked, before, completed, sent)  # not the interrupt's doing


def test_I4_compares_with_the_last_parked_snapshot_across_a_run():
    """Parked, then a run is alive (no comparison then), then idle with no
    answer: the blind spot of comparing consecutive snapshots only."""
    memory = LastParked()
    parked, running, unparked = _seen("awaiting_permission"), _seen("awaiting_permission"), _seen("idle", ())
    running.sessions["worker"].run_alive = True
    for obs in (parked, running):
        inv.parked_stays_parked(memory.before(), obs, Ledger())
        memory.update(obs)
    _fires("I4", inv.parked_stays_parked, memory.before(), unparked, Ledger())
    inv.parked_stays_parked(memory.before(), unparked, Ledger(decisions={"worker": ["call-1"]}))
    memory.update(unparked)
    assert memory.before() is None  # idle again: nothing to compare with


def test_I4_leaves_a_deleted_session_out_of_the_comparison():
    """Deleted while parked, and a new session opened under its alias: the
    new one's idle status is no unparking of the old one's card."""
    memory = LastParked()
    memory.update(_seen("awaiting_external_result"))
    reopened = _seen("idle", ())
    reopened.sessions["worker"].session_id = "w2"
    inv.parked_stays_parked(memory.before(), reopened, Ledger())
    _fires("I4", inv.parked_stays_parked, memory.before(), _seen("idle", ()), Ledger())


# ── I5 ────────────────────────────────────────────────────────────────


def test_I5_fires_on_a_payload_stranded_past_the_hand_off_protocol(machine):
    solo = machine.world.sessions["solo"]
    machine.ledger.deliver("solo", "payload-x")
    # Pushed without deliver_to_inbox: nobody is woken to consume it.
    machine.world.setup(machine.world.bus.queue_push(MessageBusKeys.inbox(solo), _hint("payload-x")))
    machine.world.settle()
    violation = _fires("I5", inv.payloads_delivered_once_in_order, machine.world.observe(settled=True), machine.ledger)
    assert "payload-x" in violation.actual  # reported as still queued


def test_I5_fires_on_duplicates_and_reordering():
    ledger = Ledger(delivered={"solo": ["p1", "p2"]})
    for hints in (["p1", "p1", "p2"], ["p2", "p1"], ["p1"]):
        obs = Observation({"solo": SessionView("solo", "s", context_hints=hints)}, settled=True)
        _fires("I5", inv.payloads_delivered_once_in_order, obs, ledger)
    good = Observation({"solo": SessionView("solo", "s", context_hints=["x", "p1", "p2"])}, settled=True)
    inv.payloads_delivered_once_in_order(good, ledger)
    unsettled = Observation({"solo": SessionView("solo", "s", context_hints=["p2"])}, settled=False)
    inv.payloads_delivered_once_in_order(unsettled, ledger)


def test_I5_lets_two_overlapping_deliveries_arrive_either_way():
    """p2's delivery began while p1's had not returned (p1 waited for the
    inbox lock): whichever pushes first is first; p3 came after both."""
    ledger = Ledger()
    ledger.deliver("solo", "p1")
    ledger.deliver("solo", "p2", overlapping=frozenset({"p1"}))
    ledger.deliver("solo", "p3")
    for hints in (["p1", "p2", "p3"], ["p2", "p1", "p3"]):
        obs = Observation({"solo": SessionView("solo", "s", context_hints=hints)}, settled=True)
        inv.payloads_delivered_once_in_order(obs, ledger)
    for hints in (["p1", "p3", "p2"], ["p3", "p2", "p1"], ["p2", "p1", "p1", "p3"]):
        obs = Observation({"solo": SessionView("solo", "s", context_hints=hints)}, settled=True)
        _fires("I5", inv.payloads_delivered_once_in_order, obs, ledger)


# ── I6 ────────────────────────────────────────────────────────────────


def test_I6_fires_when_two_runs_hold_one_session_lock():
    view = SessionView("solo", "s", lock_holders={"wake-run:solo", "chat-run:solo"})
    _fires("I6", inv.one_run_per_session, Observation({"solo": view}), Ledger())
    view.lock_holders = {"chat-run:solo"}
    inv.one_run_per_session(Observation({"solo": view}), Ledger())


# ── I7 ────────────────────────────────────────────────────────────────


def test_I7_fires_when_a_confirmed_call_never_completes():
    ledger = Ledger(decisions={"solo": ["call-1"]})
    stuck = SessionView("solo", "s", parked_status="awaiting_permission", awaiting_call_ids=["call-1"])
    _fires("I7", inv.decided_calls_complete, Observation({"solo": stuck}, settled=True), ledger)
    no_result = SessionView("solo", "s")
    _fires("I7", inv.decided_calls_complete, Observation({"solo": no_result}, settled=True), ledger)
    _fires("I7", inv.decided_calls_complete, _resolved_and_ended("error"), ledger)
    inv.decided_calls_complete(_resolved_and_ended("completed"), ledger)
    _fires("I7", inv.decided_calls_complete, _resolved_and_ended("interrupted"), ledger)
    ledger.interrupts.append(Interrupt("solo", mark=0, parked_on=("call-1",)))
    inv.decided_calls_complete(_resolved_and_ended("interrupted"), ledger)


def _resolved_and_ended(finished_reason: str) -> Observation:
    """A settled solo session whose decided call has its result and whose
    reply ended with ``finished_reason``."""
    view = SessionView(
        "solo",
        "s",
        resolved_call_ids=["call-1"],
        events=[{"type": "REPLY_END", "finished_reason": finished_reason}],
    )
    return Observation({"solo": view}, settled=True)


# ── I8 ────────────────────────────────────────────────────────────────


def test_I8_fires_when_a_message_sent_while_parked_is_accepted_and_dropped():
    ledger = Ledger()
    ledger.message_while_parked("solo", "message-1 while parked", refused=False)
    dropped = SessionView(
        "solo", "s", parked_status="awaiting_permission",
        events=[{"type": "REPLY_END", "finished_reason": "error",
                 "error": {"type": "setup", "message": "could not be prepared"}}],
    )
    violation = _fires("I8", inv.parked_messages_reach_the_agent,
                       Observation({"solo": dropped}, settled=True), ledger)
    assert "1 ReplyEnd(ERROR) published, the last: setup" in str(violation)
    # Not yet settled: the message may still be on its way.
    inv.parked_messages_reach_the_agent(Observation({"solo": dropped}), ledger)
    reached = SessionView("solo", "s", context_user_texts=["message-1 while parked"])
    inv.parked_messages_reach_the_agent(Observation({"solo": reached}, settled=True), ledger)
    kept = SessionView("solo", "s", queued=[_hint("message-1 while parked")])
    inv.parked_messages_reach_the_agent(Observation({"solo": kept}, settled=True), ledger)
    # Kept, then drained by the resuming run: a hint in the agent's context.
    hinted = SessionView("solo", "s", context_hints=["[TextBlock(type='text', text='message-1 while parked')]"])
    inv.parked_messages_reach_the_agent(Observation({"solo": hinted}, settled=True), ledger)
    # Another message's hint is not this one's.
    other = SessionView("solo", "s", context_hints=["message-9 while parked"])
    _fires("I8", inv.parked_messages_reach_the_agent, Observation({"solo": other}, settled=True), ledger)
    refused = Ledger()
    refused.message_while_parked("solo", "message-1 while parked", refused=True)
    inv.parked_messages_reach_the_agent(Observation({"solo": dropped}, settled=True), refused)


# ── I10 ───────────────────────────────────────────────────────────────


def _replies(*events: tuple[str, str, str | None]) -> list[dict]:
    return [{"type": t, "reply_id": r, "finished_reason": f} for t, r, f in events]


def test_I10_fires_on_a_reply_ended_twice_or_never():
    twice = SessionView("solo", "s", events=_replies(
        ("REPLY_START", "r1", None), ("REPLY_END", "r1", "error"), ("REPLY_END", "r1", "error"),
    ))
    _fires("I10", inv.failures_reported_once, Observation({"solo": twice}, settled=True), Ledger())
    never = SessionView("solo", "s", events=_replies(("REPLY_START", "r1", None)))
    _fires("I10", inv.failures_reported_once, Observation({"solo": never}, settled=True), Ledger())
    never.parked_status = "awaiting_permission"
    _fires("I10", inv.failures_reported_once, Observation({"solo": never}, settled=True), Ledger())
    never.events += _replies(("REQUIRE_USER_CONFIRM", "r1", None))  # parked: not ended yet
    inv.failures_reported_once(Observation({"solo": never}, settled=True), Ledger())
    resumed = SessionView("solo", "s", events=_replies(
        ("REPLY_START", "r1", None), ("REPLY_START", "r1", None), ("REPLY_END", "r1", "completed"),
    ))
    inv.failures_reported_once(Observation({"solo": resumed}, settled=True), Ledger())


def test_I10_fires_unless_the_leader_is_told_of_each_failure_once():
    failed = SessionView("worker", "w", events=_replies(
        ("REPLY_START", "r1", None), ("REPLY_END", "r1", "error"),
    ))
    text = "<system-reminder>Team member 'worker' hit an error while running, ..."
    reminder = _hint(text)
    for told in ([], [text, text]):
        leader = SessionView("leader", "l", context_hints=told)
        _fires("I10", inv.failures_reported_once,
               Observation({"worker": failed, "leader": leader}, settled=True), Ledger())
    # Told once: in its context, or still queued for a parked leader.
    for leader in (SessionView("leader", "l", context_hints=[text]),
                   SessionView("leader", "l", queued=[reminder])):
        inv.failures_reported_once(
            Observation({"worker": failed, "leader": leader}, settled=True), Ledger())
    # A worker whose process died after its reply ended cannot tell any
    # more: never told is excused, twice is not.
    crashed = Ledger()
    crashed.crashed.add("worker")
    inv.failures_reported_once(
        Observation({"worker": failed, "leader": SessionView("leader", "l")}, settled=True), crashed)
    _fires("I10", inv.failures_reported_once,
           Observation({"worker": failed, "leader": SessionView("leader", "l", context_hints=[text, text])},
                       settled=True), crashed)


def test_I10_counts_what_the_leader_was_told_not_what_was_pushed():
    """agentscope's turn tail drains the inbox and pushes payloads back:
    one reminder pushed twice is still one reminder told."""
    failed = SessionView("worker", "w", events=_replies(
        ("REPLY_START", "r1", None), ("REPLY_END", "r1", "error"),
    ))
    text = "<system-reminder>Team member 'worker' hit an error while running, ..."
    leader = SessionView("leader", "l", inbox_pushes=[_hint(text), _hint(text)],
                         context_hints=[text])
    inv.failures_reported_once(Observation({"worker": failed, "leader": leader}, settled=True), Ledger())


def test_I10_fires_when_the_other_team_is_told():
    """With two teams, the worker's failure is the leader's to hear, not
    the chief's."""
    failed = SessionView("worker", "w", events=_replies(
        ("REPLY_START", "r1", None), ("REPLY_END", "r1", "error"),
    ))
    text = "<system-reminder>Team member 'worker' hit an error while running, ..."
    misrouted = {
        "worker": failed,
        "leader": SessionView("leader", "l"),
        "chief": SessionView("chief", "c", context_hints=[text]),
    }
    violation = _fires("I10", inv.failures_reported_once, Observation(misrouted, settled=True), Ledger())
    assert "leader" in str(violation)
    routed = {**misrouted, "leader": SessionView("leader", "l", context_hints=[text]),
              "chief": SessionView("chief", "c")}
    inv.failures_reported_once(Observation(routed, settled=True), Ledger())


def test_I10_holds_on_the_story_that_once_counted_a_pushed_back_reminder():
    """The story that reported "the leader got 2 failure reminder(s)" when
    I10 counted pushes: the leader's context holds one."""
    with playing(["I10"], **BY_CODE["I10"].machine) as story:
        story.leader_invites_worker(worker_first_turn="fails")
        story.user_sends_message(session="leader", model_turn="answers")
        story.dispatcher_processes_queue()
        story.run_continues(session="worker")
        story.run_continues(session="leader")
        pushes = story.world.observe_session("leader").inbox_pushes
        # agentscope pushed the one reminder, then drained it and pushed it back.
        assert sum("hit an error" in str(p.get("hint")) for p in pushes) == 2


# ── I11 ───────────────────────────────────────────────────────────────


def test_I11_fires_on_a_payload_or_a_lease_that_waits_forever():
    ledger = Ledger(crashed={"solo"})
    stranded = SessionView("solo", "s", queued=[_hint("payload-1 from channel")])
    violation = _fires("I11", inv.nothing_waits_forever,
                       Observation({"solo": stranded}, settled=True, past_leases=True), ledger)
    assert "payload-1 from channel" in str(violation) and "crashed" in str(violation)
    # Settled, but not yet past the leases: it may still be consumed.
    inv.nothing_waits_forever(Observation({"solo": stranded}, settled=True), ledger)
    # A parked session's inbox rightly waits for the resume.
    parked = SessionView("solo", "s", parked_status="awaiting_permission", queued=stranded.queued)
    inv.nothing_waits_forever(Observation({"solo": parked}, settled=True, past_leases=True), ledger)
    for stuck in (SessionView("solo", "s", lock_leased=True),
                  SessionView("solo", "s", consumer_registered=True)):
        _fires("I11", inv.nothing_waits_forever,
               Observation({"solo": stuck}, settled=True, past_leases=True), ledger)
    inv.nothing_waits_forever(
        Observation({"solo": SessionView("solo", "s")}, settled=True, past_leases=True), ledger)


# ── I12 ───────────────────────────────────────────────────────────────


def test_I12_fires_when_a_call_runs_other_than_the_user_answered():
    ledger = Ledger()
    ledger.confirm("solo", "call-1", "change A", confirmed=True)
    ledger.confirm("solo", "call-2", "change B", confirmed=False)
    for runs in ([], ["change A", "change A"], ["change A", "change B"]):
        view = SessionView("solo", "s", tool_runs=runs)
        _fires("I12", inv.calls_run_as_answered, Observation({"solo": view}, settled=True), ledger)
    right = SessionView("solo", "s", tool_runs=["change A", "other"])
    inv.calls_run_as_answered(Observation({"solo": right}, settled=True), ledger)
    # Not settled: the confirmed call may not have run yet.
    inv.calls_run_as_answered(Observation({"solo": SessionView("solo", "s")}), ledger)


# ── I13 ───────────────────────────────────────────────────────────────


def test_I13_fires_when_the_dispatcher_loop_has_ended():
    ledger = Ledger(faults={"solo"})
    violation = _fires("I13", inv.dispatcher_survives, Observation(dispatcher_alive=False), ledger)
    assert "solo" in str(violation)
    inv.dispatcher_survives(Observation(dispatcher_alive=True), ledger)
def _end(finished_reason: str, reply_id: str = "r1") -> dict:
    return {"type": "REPLY_END", "reply_id": reply_id, "finished_reason": finished_reason}


# ── I9 ────────────────────────────────────────────────────────────────

#: solo's reply r1 asked the user about call-1 and parked.
_PARKED_REPLY = [
    {"type": "REPLY_START", "reply_id": "r1"},
    {"type": "REQUIRE_USER_CONFIRM", "reply_id": "r1", "tool_calls": [{"id": "call-1"}]},
]


def _after_interrupt(*events: dict, status="idle", awaiting=(), settled=True) -> Observation:
    """solo, once the user interrupted its parked reply r1, having
    published ``events`` since."""
    view = SessionView(
        "solo",
        "s",
        events=[*_PARKED_REPLY, *events],
        parked_status=status,
        awaiting_call_ids=list(awaiting),
    )
    return Observation({"solo": view}, settled=settled)


def test_I9_records_the_moment_the_user_pressed_stop():
    at_turn_tail = SessionView("solo", "s", events=list(_PARKED_REPLY), run_alive=True)
    sent = Ledger().interrupt(at_turn_tail)
    assert sent == Interrupt("solo", mark=2, reply_id="r1", parked_on=("call-1",), run_alive=True)
    assert sent.has_target
    ended = SessionView("solo", "s", events=[*_PARKED_REPLY, _end("completed")], run_alive=True)
    assert not Ledger().interrupt(ended).has_target  # its reply had ended: nothing to stop
    assert not Ledger().interrupt(SessionView("solo", "s")).has_target  # idle
    already_interrupted = SessionView(
        "solo",
        "s",
        events=[
            *_PARKED_REPLY,
            {"type": "REPLY_START", "reply_id": "r1"},
            {"type": "TOOL_RESULT_END", "reply_id": "r1", "tool_call_id": "call-1"},
            _end("interrupted"),
        ],
        awaiting_call_ids=["call-1"],  # its run has not stored the ending yet
        run_alive=True,
    )
    assert not Ledger().interrupt(already_interrupted).has_target  # a second click
    reopened = SessionView(
        "solo",
        "s",
        events=[*_PARKED_REPLY, _end("completed"), {"type": "REPLY_START", "reply_id": "r1"}],
        run_alive=True,
    )
    assert not Ledger().interrupt(reopened).has_target  # a continuation of an ended reply
    answered_first = Ledger(decisions={"solo": ["call-1"]})
    raced = answered_first.interrupt(at_turn_tail)  # its answer's resume is queued
    assert raced.overtaken and not raced.has_target and raced.parked_on == ()
    two_calls = SessionView("solo", "s", events=list(_PARKED_REPLY), awaiting_call_ids=["call-2"], run_alive=True)
    half = answered_first.interrupt(two_calls)  # one call still waits for the user
    assert half.parked_on == ("call-2",) and not half.overtaken and half.has_target


def test_I9_fires_when_an_accepted_interrupt_is_lost():
    ledger = Ledger(interrupts=[Interrupt("solo", mark=2, reply_id="r1", parked_on=("call-1",), run_alive=True)])
    still_parked = _after_interrupt(status="awaiting_permission", awaiting=["call-1"])
    violation = _fires("I9", inv.interrupt_not_lost, still_parked, ledger)
    assert "call-1" in violation.actual
    # unparked, but the user never learns the reply ended
    _fires("I9", inv.interrupt_not_lost, _after_interrupt(), ledger)
    # ended, but by something other than the interrupt
    _fires("I9", inv.interrupt_not_lost, _after_interrupt(_end("error")), ledger)
    _fires("I9", inv.interrupt_not_lost, _after_interrupt(_end("interrupted", "r2")), ledger)
    # an INTERRUPTED ending from before the interrupt does not count
    earlier = Ledger(interrupts=[Interrupt("solo", mark=3, reply_id="r1", parked_on=("call-1",))])
    _fires("I9", inv.interrupt_not_lost, _after_interrupt(_end("interrupted")), earlier)
    # still awaiting the call, even though an INTERRUPTED end was published
    stuck = _after_interrupt(_end("interrupted"), status="awaiting_permission", awaiting=["call-1"])
    _fires("I9", inv.interrupt_not_lost, stuck, ledger)


def test_I9_stays_quiet_when_the_interrupt_was_honoured_or_had_nothing_to_stop():
    ledger = Ledger(interrupts=[Interrupt("solo", mark=2, reply_id="r1", parked_on=("call-1",), run_alive=True)])
    # the user answered the call after pressing stop: the answer may win
    changed_mind = Ledger(interrupts=list(ledger.interrupts))
    changed_mind.decide("solo", "call-1")
    inv.interrupt_not_lost(_after_interrupt(_end("completed")), changed_mind)
    # ... but an answer given before the stop does not excuse a lost stop
    answered_first = Ledger()
    answered_first.decide("solo", "call-1")
    answered_first.interrupts.append(Interrupt("solo", mark=2, reply_id="r1", parked_on=("call-1",), run_alive=True))
    _fires("I9", inv.interrupt_not_lost, _after_interrupt(_end("completed")), answered_first)
    honoured = _after_interrupt({"type": "REPLY_START", "reply_id": "r1"}, _end("interrupted"))
    inv.interrupt_not_lost(honoured, ledger)
    # not settled yet: the interrupt may still be on its way
    inv.interrupt_not_lost(_after_interrupt(status="awaiting_permission", awaiting=["call-1"], settled=False), ledger)
    # an idle session with nothing running: a no-op is fine
    idle = Ledger(interrupts=[Interrupt("solo", mark=2)])
    inv.interrupt_not_lost(_after_interrupt(), idle)


def test_I9_stays_quiet_on_a_parked_session_agentscope_really_interrupts():
    machine = machine_enforcing("I9", interrupts=True)()
    try:
        machine.user_sends_message(session="solo", model_turn="calls GatedAction")
        machine.run_continues(session="solo")  # parked, the run is gone
        machine.user_interrupts(session="solo")  # queues a resume carrying the interrupt
        machine.everything_settles()
        (sent,) = machine.ledger.interrupts
        assert sent.has_target and not sent.run_alive
        obs = machine.world.observe(settled=True)
        inv.interrupt_not_lost(obs, machine.ledger)
        assert obs.sessions["solo"].last_reply_end() == "interrupted"
    finally:
        machine.world.close()


def test_interrupts_are_a_rule_only_where_the_machine_allows_them():
    assert not hasattr(HitlMachine, "user_interrupts")
    assert not hasattr(machine_enforcing("I1"), "user_interrupts")
    assert hasattr(machine_enforcing("I9", interrupts=True), "user_interrupts")
    assert machine_enforcing("I9", interrupts=True).configuration()["interrupts"] is True


def test_every_invariant_has_a_firing_test():
    tested = {name.split("_")[1] for name in globals() if name.startswith("test_I")}
    assert tested == {p.code for p in PROPERTIES}


# ── I14 ───────────────────────────────────────────────────────────────


def test_I14_fires_on_a_finished_job_whose_result_reaches_nobody_or_twice():
    from fakes.tool_desk import job_output

    ledger = Ledger(jobs_finished={"solo": ["solo job"]})
    notice = f"<system-notification>... Result: {job_output('solo job')}</system-notification>"
    lost = SessionView("solo", "s", context_tool_outputs=["interrupted by the user"])
    violation = _fires("I14", inv.background_results_delivered,
                       Observation({"solo": lost}, settled=True), ledger)
    assert "0 times" in str(violation)
    twice = SessionView("solo", "s", context_tool_outputs=[job_output("solo job")],
                        context_hints=[notice])
    _fires("I14", inv.background_results_delivered, Observation({"solo": twice}, settled=True), ledger)
    # Once, either way, holds; so does a session still parked or unsettled.
    for once in (SessionView("solo", "s", context_hints=[notice]),
                 SessionView("solo", "s", context_tool_outputs=[job_output("solo job")])):
        inv.background_results_delivered(Observation({"solo": once}, settled=True), ledger)
    lost.parked_status = "awaiting_permission"
    inv.background_results_delivered(Observation({"solo": lost}, settled=True), ledger)
    inv.background_results_delivered(Observation({"solo": SessionView("solo", "s")}), ledger)


# ── I15 ───────────────────────────────────────────────────────────────


def test_I15_fires_on_a_refusal_with_no_run_in_flight():
    _fires("I15", inv.refused_only_while_busy, Observation(),
           Ledger(messages=[("solo", True, False, False, "busy")]))
    inv.refused_only_while_busy(Observation(), Ledger(messages=[("solo", True, True, False, "busy")]))
    inv.refused_only_while_busy(Observation(), Ledger(messages=[("solo", False, False, False, "")]))


def test_I15_accepts_a_refusal_while_a_call_awaits_the_user():
    """Parked on a confirmation or an external result, with no run in
    flight: the agent cannot take the message, and a 409 says so."""
    inv.refused_only_while_busy(Observation(), Ledger(messages=[("solo", True, False, True, "waiting for the answer")]))
    inv.refused_only_while_busy(Observation(), Ledger(messages=[("solo", False, False, True, "")]))


def test_I15_records_whether_the_session_was_parked():
    machine = machine_enforcing("I15", parked_messages=True)()
    try:
        machine.user_sends_message(session="solo", model_turn="calls GatedAction")
        machine.everything_settles()  # the run parks and ends
        machine.user_messages_parked_session(session="solo", via="chat endpoint")
        assert [(a, busy, parked) for a, _, busy, parked, _ in machine.ledger.messages] == [
            ("solo", False, False), ("solo", False, True),
        ]
    finally:
        machine.world.close()


def test_I15_records_a_409_on_an_ordinary_message():
    machine = machine_enforcing("I15")()
    try:
        machine.user_sends_message(session="solo", model_turn="answers")  # stops at its turn tail
        machine.user_sends_message(session="solo", model_turn="answers")  # a run is in flight
        assert [m[:4] for m in machine.ledger.messages] == [("solo", False, False, False), ("solo", True, True, False)]
        assert "already has an active chat run" in machine.ledger.messages[1][4]  # agentscope's own reason
    finally:
        machine.world.close()


# ── every property, on every machine ──────────────────────────────────


def test_a_violation_of_another_property_is_written_down_not_dropped():
    """A machine built to search I3 meets an I1 violation: the story goes on
    (I3 is its verdict) and the I1 story is kept for the report."""
    from properties.machine import FOUND_ON_THE_WAY

    FOUND_ON_THE_WAY.clear()
    machine = machine_enforcing("I3")()
    try:
        solo = machine.world.sessions["solo"]
        end = ReplyEndEvent(session_id=solo, reply_id="r1", finished_reason=ReplyFinishedReason.ERROR)
        machine.world.setup(publish_session_event(machine.world.bus, solo, end.model_dump(mode="json")))
        machine.payload_arrives(source="channel", to="leader")  # a step: every property is checked
        assert set(FOUND_ON_THE_WAY) == {"I1"}
        story = FOUND_ON_THE_WAY["I1"]
        assert story.code == "I1" and [s.rule for s in story.steps] == ["payload_arrives"]
        machine.payload_arrives(source="channel", to="leader")
        assert [s.rule for s in FOUND_ON_THE_WAY["I1"].steps] == ["payload_arrives"]  # the first, once
    finally:
        machine.world.close()
        FOUND_ON_THE_WAY.clear()


def test_an_exception_no_rule_injected_fails_the_story():
    from properties.violation import UnexpectedFailure

    machine = machine_enforcing("I1")()
    try:
        async def breaks():
            raise KeyError("not injected")

        async def starts_a_task_that_breaks():
            asyncio.get_running_loop().create_task(breaks())
            await asyncio.sleep(0)

        machine.world.setup(starts_a_task_that_breaks())  # a task of the world dies
        with pytest.raises(UnexpectedFailure, match="KeyError"):
            machine.check_now()
    finally:
        machine.world.close()


def test_an_injected_fault_that_never_fired_excuses_nothing(machine):
    machine.world.fail_next("solo", "before", "queue_drain", MessageBusKeys.inbox)
    machine.check_now()
    assert machine.ledger.faults == set()


def test_I12_excuses_a_confirmed_call_the_user_had_stopped_first():
    """Stop, then confirm, before anything runs: the stop's resume ends the
    reply; the stale confirmation runs nothing."""
    view = SessionView("solo", "s", tool_runs=[])
    ledger = Ledger()
    ledger.interrupts.append(Interrupt("solo", mark=0, parked_on=("call-1",)))
    ledger.confirm("solo", "call-1", "solo needs approval", True)
    inv.calls_run_as_answered(Observation({"solo": view}, settled=True), ledger)
    _fires("I12", inv.calls_run_as_answered, Observation({"solo": view}, settled=True),
           Ledger(confirmations={"solo": [("call-1", "solo needs approval", True)]}))


def test_I12_excuses_a_session_a_fired_fault_touched():
    view = SessionView("solo", "s", tool_runs=[])
    confirmed = {"solo": [("call-1", "solo needs approval", True)]}
    inv.calls_run_as_answered(Observation({"solo": view}, settled=True),
                              Ledger(confirmations=confirmed, faults={"solo"}))
    _fires("I12", inv.calls_run_as_answered, Observation({"solo": view}, settled=True),
           Ledger(confirmations=confirmed))


# ── I16 ───────────────────────────────────────────────────────────────


def _restarted(ledger: Ledger | None = None) -> Ledger:
    """A ledger whose node restarted while solo's card for c1 showed."""
    ledger = ledger or Ledger()
    ledger.restarts.append(Restart(parked={"solo": ("c1",)}, cancelled=frozenset({"solo"}),
                                   stops={"solo": 0}, marks={"solo": 1}))
    return ledger


def test_I16_fires_on_a_card_gone_or_a_reply_interrupted_after_a_restart():
    started = {"type": "REPLY_START", "reply_id": "r1"}
    gone = SessionView("solo", "s", events=[started])
    violation = _fires("I16", inv.parked_card_survives_restart, Observation({"solo": gone}, settled=True),
                       _restarted())
    assert "no longer awaiting ['c1']" in str(violation)
    ended = SessionView("solo", "s", awaiting_call_ids=["c1"], events=[
        started, {"type": "REPLY_END", "reply_id": "r1", "finished_reason": "interrupted"}])
    violation = _fires("I16", inv.parked_card_survives_restart, Observation({"solo": ended}, settled=True),
                       _restarted())
    assert "ended INTERRUPTED with no stop pressed: ['r1']" in str(violation)


def test_I16_holds_for_a_card_that_still_shows_or_that_the_user_answered_or_stopped():
    shows = SessionView("solo", "s", awaiting_call_ids=["c1"], parked_status="awaiting_permission")
    inv.parked_card_survives_restart(Observation({"solo": shows}, settled=True), _restarted())
    gone = SessionView("solo", "s")
    answered = _restarted()
    answered.decide("solo", "c1")
    inv.parked_card_survives_restart(Observation({"solo": gone}, settled=True), answered)
    stopped = _restarted()
    stopped.interrupts.append(Interrupt(alias="solo", mark=2))
    inv.parked_card_survives_restart(Observation({"solo": gone}, settled=True), stopped)
    stopped_before = _restarted(Ledger(interrupts=[Interrupt(alias="solo", mark=1, parked_on=("c1",))]))
    inv.parked_card_survives_restart(Observation({"solo": gone}, settled=True), stopped_before)
    inv.parked_card_survives_restart(Observation({"solo": gone}), _restarted())  # not settled yet
    # A card answered before the restart is not one it must keep.
    inv.parked_card_survives_restart(Observation({"solo": gone}, settled=True), Ledger())


# ── I17 ───────────────────────────────────────────────────────────────


def test_I17_fires_on_a_settle_that_kept_busy():
    busy = Ledger(restless=["9001 bus operations in 300 virtual seconds of settling"])
    violation = _fires("I17", inv.work_is_bounded, Observation(), busy)
    assert "9001 bus operations" in str(violation)
    inv.work_is_bounded(Observation(), Ledger())


def test_I17_is_what_a_restless_settle_reports(monkeypatch):
    from harness.kernel import interleaver

    monkeypatch.setattr(interleaver, "BUSY_BASE", 5)
    monkeypatch.setattr(interleaver, "BUSY_RATE", 0.0)
    with pytest.raises(InvariantViolated) as caught:
        with playing(enforcing=["I17"], cast=["leader", "solo"]) as story:
            story.user_sends_message(session="solo", model_turn="answers")
            story.everything_settles()
    assert caught.value.code == "I17" and "bus operations in" in str(caught.value)


# ── I18 ───────────────────────────────────────────────────────────────


def test_I18_fires_on_a_deleted_session_that_left_something_behind():
    left = SessionView("solo", "s-old", stored=False, consumer_registered=True, queued=[{"hint": "x"}])
    violation = _fires("I18", inv.deleted_sessions_left_alone, Observation(deleted=[left], settled=True), Ledger())
    assert "its inbox registration, 1 queued payload(s)" in str(violation)
    stored = SessionView("solo", "s-old")
    assert "its stored record" in str(_fires("I18", inv.deleted_sessions_left_alone,
                                             Observation(deleted=[stored], settled=True), Ledger()))


def test_I18_holds_for_a_deleted_session_that_is_gone_or_a_world_not_yet_settled():
    gone = SessionView("solo", "s-old", stored=False)
    inv.deleted_sessions_left_alone(Observation(deleted=[gone], settled=True), Ledger())
    inv.deleted_sessions_left_alone(Observation(deleted=[SessionView("solo", "s-old", run_alive=True)]), Ledger())


# ── I19 ───────────────────────────────────────────────────────────────


def test_I19_fires_on_a_refusal_whose_reason_is_not_the_sessions_state():
    waiting = "Session 's' is waiting for the answer to 1 tool call(s); answer them"
    violation = _fires("I19", inv.refusals_tell_the_truth, Observation(),
                       Ledger(messages=[("solo", True, True, True, waiting)]))  # during the resume
    assert "a run in flight, parked" in str(violation)
    _fires("I19", inv.refusals_tell_the_truth, Observation(),
           Ledger(messages=[("solo", True, False, False, "Session 's' already has an active chat run")]))


def test_I19_holds_for_true_reasons_and_accepted_messages():
    inv.refusals_tell_the_truth(Observation(), Ledger(messages=[
        ("solo", True, False, True, "Session 's' is waiting for the answer to 1 tool call(s)"),
        ("solo", True, True, False, "Session 's' already has an active chat run in this process."),
        ("solo", False, False, False, ""),
    ]))


# ── I20 ───────────────────────────────────────────────────────────────


def test_I20_fires_on_an_accepted_message_turned_into_a_hint_or_dropped():
    ledger = Ledger(parked_messages={"solo": [("message-7 while parked", False)]})
    hinted = SessionView("solo", "s", context_hints=["<hint> message-7 while parked </hint>"])
    violation = _fires("I20", inv.accepted_messages_stay_the_users, Observation({"solo": hinted}, settled=True),
                       ledger)
    assert "only as a hint" in str(violation)
    dropped = SessionView("solo", "s")
    assert "nowhere" in str(_fires("I20", inv.accepted_messages_stay_the_users,
                                   Observation({"solo": dropped}, settled=True), ledger))


def test_I20_holds_for_a_user_message_a_refusal_or_one_waiting_for_the_resume():
    ledger = Ledger(parked_messages={"solo": [("message-7 while parked", False), ("message-8 while parked", True)]})
    as_users = SessionView("solo", "s", context_user_texts=["message-7 while parked"])
    inv.accepted_messages_stay_the_users(Observation({"solo": as_users}, settled=True), ledger)
    waiting = SessionView("solo", "s", parked_status="awaiting_permission",
                          queued=[{"hint": "message-7 while parked"}])
    inv.accepted_messages_stay_the_users(Observation({"solo": waiting}, settled=True), ledger)
    inv.accepted_messages_stay_the_users(Observation({"solo": SessionView("solo", "s")}), ledger)  # unsettled

"""The shutdown-keeps-triggers fix (F14): stories in which a node's
graceful shutdown drops what its wake-up dispatcher holds fail without it
and hold with it. Each is a story I16's search found, played back on the
installed release; the fix also ships as a diff per release."""
from __future__ import annotations

import pytest

from harness.world import agentscope_under_test
from properties.story.playback import playing
from properties.violation import InvariantViolated
from reference_fix.diffs import combined_diff, diff_path
from tests.fix_checks import alone

STORY = dict(
    cast=["leader", "solo"], interrupts=True, restarts=True, messaged=["leader", "solo"],
    sources=["team member", "channel", "background task"],
    turns=["calls GatedAction", "calls ExternalJob", "answers"],
)


def _violation(enforcing: str, play) -> str | None:
    try:
        with playing(enforcing=[enforcing], **STORY) as story:
            play(story)
            story.everything_settles()
            return None
    except InvariantViolated as violation:
        return str(violation)


def _wake_spawned_before_the_shutdown(story) -> None:
    """A payload's wake-up run is spawned just before the node shuts down,
    and cancelled by the run registry before it took its session lock."""
    story.node_restarts()
    story.node_restarts()
    story.payload_arrives(source="background task", to="solo")
    story.node_restarts()


def _denial_drained_by_a_stopping_dispatcher(story) -> None:
    """The user's answer's resume is being drained as the node shuts down."""
    story.node_restarts()
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    story.node_restarts()
    story.payload_arrives(source="channel", to="leader")
    story.user_answers_confirmation(session="leader", decision="denies", posted_to_leader=False)
    story.node_restarts()


def _denial_carried_by_a_run_the_shutdown_cancels(story) -> None:
    """The resume run of the user's answer is spawned and cancelled by the
    run registry before it took its session lock."""
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    story.user_answers_confirmation(session="leader", decision="denies", posted_to_leader=False)
    story.run_reaches_turn_tail(session="leader")
    story.node_restarts()
    story.user_sends_message(session="solo", model_turn="answers")
    story.run_reaches_turn_tail(session="solo")
    story.node_restarts()


@pytest.fixture
def fix():
    yield from alone("shutdown-keeps-triggers")


def _stop_carried_by_a_run_the_shutdown_cancels(story) -> None:
    """The user presses stop on a parked card (the lock is free: a resume
    carrying the interrupt is queued); its run is spawned and cancelled by
    the run registry before it took its session lock (8759efe9 in Redis
    mode, as released too)."""
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    story.run_continues(session="leader")
    story.user_interrupts(session="leader")
    story.node_restarts()


def test_a_shutdown_drops_what_the_dispatcher_drained_unless_fixed(fix):
    assert "I7" in (_violation("I7", _denial_drained_by_a_stopping_dispatcher) or "")
    for patch in fix:
        patch.apply()
    assert _violation("I7", _denial_drained_by_a_stopping_dispatcher) is None


def test_an_answer_whose_run_the_shutdown_cancelled_is_queued_again_unless_fixed(fix):
    assert "I7" in (_violation("I7", _denial_carried_by_a_run_the_shutdown_cancels) or "")
    for patch in fix:
        patch.apply()
    assert _violation("I7", _denial_carried_by_a_run_the_shutdown_cancels) is None


def test_a_stop_whose_run_the_shutdown_cancelled_is_queued_again_unless_fixed(fix):
    assert "I9" in (_violation("I9", _stop_carried_by_a_run_the_shutdown_cancels) or "")
    for patch in fix:
        patch.apply()
    assert _violation("I9", _stop_carried_by_a_run_the_shutdown_cancels) is None


def test_a_wake_run_cancelled_before_its_lock_still_loses_its_trigger(fix):
    """What this fix leaves open (docs/findings.md): a wake-up's run the
    registry cancels before it took its session lock is not handed back.
    When a fix closes it, this test says so."""
    for patch in fix:
        patch.apply()
    assert "I5" in (_violation("I5", _wake_spawned_before_the_shutdown) or "")


def test_the_diff_is_the_runtime_change(fix):
    shipped = diff_path("shutdown-keeps-triggers", agentscope_under_test.version()).read_text(encoding="utf-8")
    assert combined_diff(fix).strip() == shipped.strip()

"""The stale-decisions fix (F16): a denial whose call a stop closed before
its resume ran reaches the agent once it is parked on another call, and
ends that reply with ``ReplyEnd(ERROR)``; with the fix it is dropped. The
story is the one I16's search met with the other fixes on, played back on
the installed release; the fix also ships as a diff per release."""
from __future__ import annotations

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.story.playback import playing
from properties.violation import InvariantViolated
from reference_fix.diffs import combined_diff, diff_path

STORY = dict(
    cast=["leader", "solo"], interrupts=True, restarts=True, messaged=["leader", "solo"],
    sources=["team member", "channel", "background task"],
    turns=["calls GatedAction", "calls ExternalJob", "answers"],
)


def _violation() -> str | None:
    try:
        with playing(enforcing=["I1"], **STORY) as story:
            story.payload_arrives(source="background task", to="solo")
            story.user_sends_message(session="solo", model_turn="calls GatedAction")
            story.user_answers_confirmation(session="solo", decision="denies", posted_to_leader=False)
            story.user_interrupts(session="solo")
            story.payload_arrives(source="team member", to="solo")
            story.user_interrupts(session="solo")
            story.user_sends_message(session="solo", model_turn="calls ExternalJob")
            story.everything_settles()
            return None
    except InvariantViolated as violation:
        return str(violation)


@pytest.fixture
def fix():
    (patch,) = reference_fix.FIXES["stale-decisions"]
    assert agentscope_under_test.version() in patch.targets and patch.refusal() is None
    was = reference_fix.is_applied()
    if was:
        reference_fix.remove()
    yield patch
    patch.remove()
    if was:
        reference_fix.apply()


def test_a_stale_denial_ends_the_next_parked_reply_unless_fixed(fix):
    unfixed = _violation() or ""
    assert "I1" in unfixed and "ReplyEnd(ERROR) published for solo" in unfixed
    fix.apply()
    assert _violation() is None


def test_the_diff_is_the_runtime_change(fix):
    shipped = diff_path("stale-decisions", agentscope_under_test.version()).read_text(encoding="utf-8")
    assert combined_diff((fix,)).strip() == shipped.strip()


def test_it_refuses_a_source_without_the_wake_up_check(fix):
    with pytest.raises(reference_fix.FixRefused):
        fix.check_target(agentscope_under_test.version(), "def _run_impl(): ...  # a modified checkout")

"""The stops-in-turn-tail fix: its stories fail without it and hold with it.

Each story is a committed counterexample's (F3: ``I9-*``, two steps; F8:
``I5-*``, four steps), played on the installed release. The fix also ships
as a diff per release family, checked against the runtime change.
"""
from __future__ import annotations

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.story.playback import playing
from properties.violation import InvariantViolated
from reference_fix import stops_in_turn_tail as fix
from reference_fix.diffs import diff_path

STORY = dict(
    bus_faults=False, cast=["leader", "solo"], crashes=False, interrupts=True,
    messaged=["leader", "solo"], parked_messages=False,
    sources=["team member", "channel", "background task"],
    turns=["calls GatedAction", "calls ExternalJob", "answers"],
)


def _patch() -> reference_fix.SourcePatch:
    """The variant of the fix for the installed release (refused on others)."""
    release = agentscope_under_test.version()
    chosen = fix.PATCH_WITHOUT_NAMING if release in fix.WITHOUT_NAMING else fix.PATCH
    if chosen.refusal() is not None:
        pytest.skip(chosen.refusal())
    return chosen


def _violation(enforcing: str, play) -> str | None:
    """Play a story; the violation it ends in, or None if it holds."""
    try:
        with playing(enforcing=[enforcing], **STORY) as story:
            play(story)
            story.everything_settles()
            return None if enforcing != "I9" else story.world.observe_session("leader").last_reply_end()
    except InvariantViolated as violation:
        return str(violation)


def _stop_once_parked(story) -> None:
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    story.user_interrupts(session="leader")


def _stop_twice_in_turn_tail(story) -> None:
    story.payload_arrives(source="channel", to="solo")
    story.dispatcher_processes_queue()
    story.user_interrupts(session="solo")
    story.user_interrupts(session="solo")


@pytest.fixture
def applied():
    patch = _patch()
    was = reference_fix.is_applied()
    if was:
        reference_fix.remove()
    yield patch
    patch.remove()
    if was:
        reference_fix.apply()


def test_a_stop_once_the_card_shows_is_lost_unless_fixed(applied):
    assert "I9" in _violation("I9", _stop_once_parked)
    applied.apply()
    assert _violation("I9", _stop_once_parked) == "interrupted"


def test_a_second_stop_in_the_clean_up_loses_the_payload_unless_fixed(applied):
    assert "I5" in _violation("I5", _stop_twice_in_turn_tail)
    applied.apply()
    assert _violation("I5", _stop_twice_in_turn_tail) is None


def test_the_diff_is_the_runtime_change(applied):
    shipped = diff_path(applied.name, agentscope_under_test.version()).read_text(encoding="utf-8")
    assert applied.unified_diff().strip() == shipped.strip()
    added = "\n".join(l[1:] for l in shipped.splitlines() if l.startswith("+") and not l.startswith("+++"))
    assert "asyncio.shield(persist_task)" in added and "UserInterruptEvent(" in added


def test_it_refuses_a_release_it_was_not_written_for():
    with pytest.raises(reference_fix.FixRefused, match=r"this agentscope is 2\.0\.6"):
        fix.PATCH.check_target("2.0.6", "")
    with pytest.raises(reference_fix.FixRefused, match="does not contain the code"):
        fix.PATCH.check_target("2.0.11", fix.FLAG_BEFORE + "# the rest of a modified checkout\n")

"""The drain-survives-stops fix: a user's stop whose cancel lands while a
run reads an inbox drain's reply (the server applied it) loses what the
drain removed, once before a reasoning step and once in the turn tail;
each patch keeps its own drain's payloads, and neither story holds with the
other patch alone."""
from __future__ import annotations

import pytest

from tests.fix_checks import alone, check_diff_file, check_refusals, violation

FIX = "drain-survives-stops"


def _stop_in_reasoning_drain(story) -> None:
    """A payload wakes idle solo; its run is held at the drain before it
    reasons."""
    story.payload_arrives(source="team member", to="solo")
    for task in ["wakeup-dispatcher"] * 2 + ["wake-run:solo"] * 4:
        story.one_task_takes_a_step(task=task)


def _stop_in_turn_tail_drain(story) -> None:
    """solo's reply ended; a payload deferred to its run waits; the run
    took the inbox lock and is held at its turn tail's drain."""
    story.user_sends_message(session="solo", model_turn="answers")
    story.run_reaches_turn_tail(session="solo")
    story.payload_arrives(source="team member", to="solo")
    story.one_task_takes_a_step(task="chat-run:solo")


def _violation(held_at_the_drain) -> str | None:
    def play(story) -> None:
        held_at_the_drain(story)
        story.user_interrupts(session="solo")

    return violation(
        play, enforcing=["I5"], streaming=True, cast=["leader", "solo"], interrupts=True,
        messaged=["solo"], sources=["team member"], turns=["answers"],
    )


@pytest.fixture
def patches():
    yield from alone(FIX)


@pytest.mark.parametrize("n, story", [(0, _stop_in_reasoning_drain), (1, _stop_in_turn_tail_drain)])
def test_a_stop_in_a_drain_loses_its_payload_unless_its_patch_is_on(patches, n, story):
    unfixed = _violation(story) or ""
    assert "I5" in unfixed and "solo's context holds []; still queued: []" in unfixed
    other = patches[1 - n]
    other.apply()
    assert "I5" in (_violation(story) or "")  # the other drain's patch does not cover it
    other.remove()
    patches[n].apply()
    assert _violation(story) is None


def test_the_diffs_are_the_runtime_change(patches):
    check_diff_file(patches, FIX)
    check_refusals(patches)

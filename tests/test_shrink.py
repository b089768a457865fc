"""Shrinking a failing story by deleting steps (properties/story/shrink.py).

The story is F5's (I11), which fails on every release the harness gates:
a woken worker's run dies before consuming anything, and a payload then
waits in its inbox forever. Padded with steps it does not need, it must
shrink back to the four that make it fail, the same way every time.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from properties.machine import machine_for
from properties.story.playback import replay
from properties.story.program import story_steps
from properties.story.record import Counterexample, Step
from properties.story.shrink import Shrinker, origin, shrink, shrink_each

NEEDED = [
    Step("leader_invites_worker", {"worker_first_turn": "fails"}),
    Step("dispatcher_processes_queue"),
    Step("process_crashes", {"session": "worker"}),
    Step("payload_arrives", {"source": "channel", "to": "worker"}),
]

PADDED = [
    Step("everything_settles"),
    Step("user_sends_message", {"session": "solo", "model_turn": "answers"}),
    Step("everything_settles"),
    NEEDED[0],
    NEEDED[1],
    Step("payload_arrives", {"source": "team member", "to": "solo"}),
    NEEDED[2],
    Step("payload_arrives", {"source": "channel", "to": "solo"}),
    NEEDED[3],
    Step("everything_settles"),
]


def _failure(steps: list[Step]) -> BaseException:
    story = Counterexample(
        code="I11", title="", statement="", failure="", trace="", events={},
        steps=steps, machine=machine_for("I11").configuration(),
        agentscope_version="", agentscope_path="", reference_fix=False,
    )
    failure = replay(story)
    assert failure is not None and failure.counterexample.code == "I11", failure
    return failure


@pytest.fixture(scope="module")
def padded() -> BaseException:
    return _failure(PADDED)


@pytest.fixture(scope="module")
def shrunk(padded) -> BaseException:
    return shrink(padded)


def test_a_padded_story_shrinks_to_the_steps_it_needs(shrunk):
    assert shrunk.counterexample.code == "I11"
    assert [s for s in shrunk.counterexample.steps if s.rule != "teardown"] == NEEDED


def test_the_shrunk_story_replays_to_the_same_failure(shrunk):
    again = replay(replace(shrunk.counterexample, steps=NEEDED))
    assert again.counterexample.failure == shrunk.counterexample.failure
    assert again.counterexample.trace == shrunk.counterexample.trace


def test_its_notes_name_the_shrunk_program_as_hypothesis_would(shrunk):
    assert [rule for rule, _ in story_steps(shrunk)] == [s.rule for s in NEEDED]
    assert any("4 of the 10 steps Hypothesis found" in str(n) for n in shrunk.__notes__)


def test_shrinking_again_gives_the_same_story_in_as_many_replays(padded, shrunk):
    again = Shrinker(padded)
    assert again.run().counterexample.name == shrunk.counterexample.name
    assert any(f"in {again.replays} replays" in str(n) for n in shrunk.__notes__)


def test_the_budget_counts_replays_and_keeps_the_best_so_far(padded):
    shrinker = Shrinker(padded, budget=3)
    best = shrinker.run()
    assert shrinker.replays == 3
    assert best.counterexample.code == "I11"
    assert len(shrinker.steps) < len(PADDED)


def test_a_story_that_fails_another_way_is_not_kept(padded):
    """Its origin is where the property's check broke: a shorter story
    that breaks the same property elsewhere is another bug."""
    assert origin(padded)[1][1][0].endswith("properties/invariants/liveness.py")
    shrinker = Shrinker(padded, budget=3)
    shrinker.origin = (("InvariantViolated", None),)
    assert shrinker.run() is padded and shrinker.replays == 3


def test_a_story_with_no_shorter_failure_keeps_its_own_program():
    needed = _failure(NEEDED)
    assert shrink(needed) is needed
    assert story_steps(needed) == []  # Hypothesis' own notes name its program
    assert any("4 of the 4 steps Hypothesis found" in str(n) for n in needed.__notes__)


def test_each_story_of_a_group_is_shrunk_and_the_rest_left_alone():
    other = ValueError("no story")
    group = shrink_each(ExceptionGroup("two failures", [_failure(PADDED), other]))
    shrunk, left = group.exceptions
    assert [s for s in shrunk.counterexample.steps if s.rule != "teardown"] == NEEDED
    assert left is other


def test_a_story_shrunk_while_its_failure_is_handled_still_shrinks(padded):
    """Replays raise within the handler of the found failure: their own
    chain must not reach into it."""
    try:
        raise padded
    except Exception as caught:  # pylint: disable=broad-except
        inside = Shrinker(caught, budget=3)
        inside.run()
    assert len(inside.steps) < len(PADDED)

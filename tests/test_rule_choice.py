"""A story whose enabled rules cannot act goes on instead of being thrown
away (:mod:`properties.rule_choice`); where Hypothesis can draw a rule,
the draw is its own, choice for choice.

(Hypothesis discards examples for other reasons too, such as an early
example that outgrows the size it was allowed: only the discards for want
of a rule that can act are counted.)

The machine below has one rule that can always act and three that can act
only once a counter moves; swarm testing turns rules off per example, so
with Hypothesis' own draw some examples can do nothing and are discarded,
together with what their teardown found. With the harness's draw none is.
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.observability import (
    add_observability_callback,
    remove_observability_callback,
)
from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import (
    RuleBasedStateMachine,
    RuleStrategy,
    precondition,
    rule,
    run_state_machine_as_test,
)

from properties import rule_choice


def toy_machine(with_story_choice: bool) -> type:
    class Toy(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            if with_story_choice:
                rule_choice.install(self)
            self.moves = 0

        @rule()
        def move(self) -> None:
            self.moves += 1

        @precondition(lambda self: self.moves > 0)
        @rule()
        def left(self) -> None:
            assert self.moves > 0, "left played before its precondition held"

        @precondition(lambda self: self.moves > 0)
        @rule()
        def right(self) -> None:
            assert self.moves > 0, "right played before its precondition held"

        @precondition(lambda self: self.moves > 0)
        @rule()
        def back(self) -> None:
            assert self.moves > 0, "back played before its precondition held"

    Toy.__name__ = f"Toy_{with_story_choice}"
    return Toy


def seeded_search(machine: type, examples: int) -> None:
    """Search ``machine`` with seed 0: Hypothesis' generate phase only,
    stories of six steps."""
    machine._hypothesis_internal_use_seed = 0  # pylint: disable=protected-access
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, database=None, deadline=None, stateful_step_count=6,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck),
    ))


#: How Hypothesis words an example discarded because no enabled rule could act.
NO_RULE_CAN_ACT = "unable to satisfy"


def outcomes(machine: type) -> tuple[Counter, BaseException | None]:
    """The statuses of the examples a seeded search of ``machine`` played
    (``no rule can act``: discarded for want of an enabled rule that can
    act), and what the search raised."""
    seen: Counter = Counter()

    def note(observation) -> None:
        if observation.type == "test_case" and "shrink" not in (observation.how_generated or ""):
            no_rule = NO_RULE_CAN_ACT in str(observation.status_reason)
            seen["no rule can act" if no_rule else observation.status] += 1

    add_observability_callback(note)
    raised = None
    try:
        seeded_search(machine, examples=100)
    except AssertionError as failure:
        raised = failure
    finally:
        remove_observability_callback(note)
    return seen, raised


def test_hypothesis_own_draw_discards_stories_that_cannot_go_on():
    """The premise: without the harness's draw, examples are discarded."""
    seen, _ = outcomes(toy_machine(with_story_choice=False))
    assert seen["no rule can act"] > 0, seen


def test_no_story_is_discarded_for_want_of_an_enabled_rule():
    seen, raised = outcomes(toy_machine(with_story_choice=True))
    assert raised is None
    assert seen["no rule can act"] == 0, seen
    assert seen["passed"] == 100, seen


def stories_drawn(with_story_choice: bool) -> list[str]:
    """The rules each story of a seeded search played, on a machine whose
    three rules can always act (so Hypothesis never gives up on it)."""
    stories: list[str] = []

    class Free(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            if with_story_choice:
                rule_choice.install(self)
            stories.append("")

        @rule()
        def a(self) -> None:
            stories[-1] += "a"

        @rule()
        def b(self) -> None:
            stories[-1] += "b"

        @rule()
        def c(self) -> None:
            stories[-1] += "c"

    seeded_search(Free, examples=40)
    return stories


def test_where_hypothesis_can_draw_a_rule_the_draw_is_its_own():
    """Same seed, same stories: the rules that are on, and which of them
    each step plays (swarm testing included: some stories play one rule)."""
    own = stories_drawn(with_story_choice=False)
    ours = stories_drawn(with_story_choice=True)
    assert ours == own
    assert any(len(set(story)) == 1 for story in own), own
    assert any(len(set(story)) == 3 for story in own), own


def test_its_spans_are_labelled_as_hypothesis_labels_them():
    machine = toy_machine(with_story_choice=False)()
    assert rule_choice.StoryRuleChoice(machine).label == RuleStrategy(machine).label


def test_a_machine_where_no_rule_can_act_is_an_invalid_definition():
    class Stuck(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            rule_choice.install(self)

        @precondition(lambda self: False)
        @rule()
        def never(self) -> None:
            pass

    with pytest.raises(InvalidDefinition, match="no rule of Stuck can act: never"):
        run_state_machine_as_test(Stuck, settings=settings(max_examples=1, database=None))


def test_a_hypothesis_without_the_rule_strategy_is_refused(monkeypatch):
    monkeypatch.setattr(rule_choice, "RuleStrategy", None)
    with pytest.raises(rule_choice.UnsupportedHypothesis, match="RuleStrategy"):
        toy_machine(with_story_choice=True)()

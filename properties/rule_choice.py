"""How a story chooses its next step: Hypothesis' rule draw, except that a
story is not thrown away because none of its enabled rules can act.

Hypothesis' stateful draw turns some rules off for a whole example (swarm
testing, its feature flags) and then draws among the rules that are both
on and whose precondition holds. When none is, it gives up: the example is
discarded as invalid. The machine's teardown still runs, and for a property
checked once the world has settled, that teardown can find a real
violation, which Hypothesis then drops with the example. Measured on 2.0.8
(``scripts/discarded_draws.py``), the ``ci`` searches of I5, I7 and I10 to
I14 discarded 14 to 35 % of their stories, most of them this way (I14: 8
of its 13 discards), and I11's search met its bug at story 9 of seed 0 but
kept it only at story 108.

Here, a step is first drawn exactly as Hypothesis draws it (the same
choices: a test compares the stories of a seeded search). Only where
Hypothesis would give up is it drawn among every rule that can act (as
Hypothesis itself keeps at least one rule on): the story goes on instead
of vanishing. From that story on the search differs, as Hypothesis then
explores from a different tree.

This reaches into Hypothesis' internals (the stateful rule strategy's
rules, feature-flag strategy and validity check; a filtered
``sampled_from``'s draw that may come back empty), not into agentscope.
:func:`install` checks that those parts exist and says which is missing.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.strategies import SearchStrategy

try:
    from hypothesis.internal.conjecture.utils import calc_label_from_cls
    from hypothesis.stateful import RuleStrategy
    from hypothesis.strategies._internal.strategies import filter_not_satisfied
except ImportError:  # pragma: no cover - a Hypothesis without them is refused below
    RuleStrategy = None

#: What :class:`StoryRuleChoice` uses of Hypothesis' own rule strategy.
_NEEDED = ("rules", "enabled_rules_strategy", "is_valid", "machine")


class UnsupportedHypothesis(RuntimeError):
    """This Hypothesis lacks a part of its rule draw the harness builds on."""


def _lacking(parts: str) -> UnsupportedHypothesis:
    """The refusal of a Hypothesis that lacks ``parts``."""
    return UnsupportedHypothesis(
        f"this Hypothesis lacks {parts}; the harness's rule draw needs them "
        "(see properties/rule_choice.py)",
    )


class _FilteredOrNothing(SearchStrategy):
    """What ``filtered`` (a filtered ``sampled_from``) draws, or
    ``filter_not_satisfied`` where it would give up."""

    def __init__(self, filtered: SearchStrategy) -> None:
        super().__init__()
        self._filtered = filtered

    def do_draw(self, data):
        return self._filtered.do_filtered_draw(data)


if RuleStrategy is not None:

    class StoryRuleChoice(RuleStrategy):
        """Hypothesis' rule strategy, which falls back to the rules that can
        act when the feature flags leave none."""

        def __init__(self, machine: RuleBasedStateMachine) -> None:
            super().__init__(machine)
            missing = [name for name in _NEEDED if not hasattr(self, name)]
            if missing:
                raise _lacking(", ".join(f"RuleStrategy.{name}" for name in missing))
            self._flags = None
            any_rule = st.sampled_from(self.rules)
            #: Hypothesis' own draw: a rule that can act and is on.
            self._enabled = any_rule.filter(self._can_act_and_is_on)
            if not hasattr(self._enabled, "do_filtered_draw"):
                raise _lacking("a filtered sampled_from's do_filtered_draw")
            self._enabled_or_nothing = _FilteredOrNothing(self._enabled)
            #: The fallback: a rule that can act.
            self._can_act = any_rule.filter(self.is_valid)

        def calc_label(self) -> int:
            # The label of Hypothesis' own rule strategy: its shrinker
            # orders its passes by the labels of a story's spans.
            return calc_label_from_cls(RuleStrategy)

        def _can_act_and_is_on(self, rule) -> bool:
            # As Hypothesis: the precondition first, so that a rule that
            # cannot act draws no flag.
            return self.is_valid(rule) and self._flags.is_enabled(rule.function.__name__)

        def do_draw(self, data):
            if not any(self.is_valid(rule) for rule in self.rules):
                names = ", ".join(r.function.__name__ for r in self.rules)
                raise InvalidDefinition(f"no rule of {type(self.machine).__name__} can act: {names}")
            self._flags = data.draw(self.enabled_rules_strategy)
            rule = data.draw(self._enabled_or_nothing, label=self._enabled.label)
            if rule is filter_not_satisfied:
                rule = data.draw(self._can_act)
            arguments = {}
            for name, strategy in rule.arguments_strategies.items():
                try:
                    arguments[name] = data.draw(strategy)
                except Exception as failure:
                    failure.add_note(f"while drawing {name!r} for rule {rule.function.__name__}")
                    raise
            return rule, arguments


def install(machine: RuleBasedStateMachine) -> None:
    """Make ``machine`` draw its steps with :class:`StoryRuleChoice`."""
    if RuleStrategy is None or not hasattr(machine, "_rules_strategy"):
        raise _lacking(
            "RuleStrategy, filter_not_satisfied, calc_label_from_cls "
            "or machine._rules_strategy",
        )
    machine._rules_strategy = StoryRuleChoice(machine)  # pylint: disable=protected-access

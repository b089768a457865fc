"""How a story chooses its next step: Hypothesis' rule draw, except that a
story is never thrown away because its enabled rules cannot act.

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

Here, when no rule that is on can act, the step is drawn among every rule
that can (as Hypothesis itself keeps at least one rule on): the story goes
on instead of vanishing. I11's seeded searches (seeds 0-4) then keep their
first failure at stories 3, 3, 3, 9 and 47, not 108, 16, 106, 37 and 27;
I14's median is about the same (45 stories over seeds 0-11, against 38.5).
While some rule that is on can act, the step is drawn as Hypothesis draws
it: an index into all the machine's rules, refused unless it names one of
them, so a shrunk index still names the same rule.

This reaches into ``hypothesis.stateful``'s rule strategy (its rules, the
feature-flag strategy, the validity check), not into agentscope.
:func:`install` checks that those parts exist and says which is missing.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import RuleBasedStateMachine

try:
    from hypothesis.stateful import RuleStrategy
except ImportError:  # pragma: no cover - a Hypothesis without it is refused below
    RuleStrategy = None

#: What :class:`StoryRuleChoice` uses of Hypothesis' own rule strategy.
_NEEDED = ("rules", "enabled_rules_strategy", "is_valid", "machine")


class UnsupportedHypothesis(RuntimeError):
    """This Hypothesis lacks a part of its rule draw the harness builds on."""


if RuleStrategy is not None:

    class StoryRuleChoice(RuleStrategy):
        """Hypothesis' rule strategy, which falls back to every rule that
        can act when the feature flags leave none."""

        def __init__(self, machine: RuleBasedStateMachine) -> None:
            super().__init__(machine)
            missing = [name for name in _NEEDED if not hasattr(self, name)]
            if missing:
                raise UnsupportedHypothesis(
                    f"hypothesis.stateful.RuleStrategy has no {', '.join(missing)}; "
                    "the harness's rule draw needs them (see properties/rule_choice.py)",
                )
            self._any_rule = st.sampled_from(self.rules)

        def do_draw(self, data):
            flags = data.draw(self.enabled_rules_strategy)
            can_act = [r for r in self.rules if self.is_valid(r)]
            if not can_act:
                names = ", ".join(r.function.__name__ for r in self.rules)
                raise InvalidDefinition(f"no rule of {type(self.machine).__name__} can act: {names}")
            on = {r.function.__name__ for r in can_act if flags.is_enabled(r.function.__name__)}
            allowed = on or {r.function.__name__ for r in can_act}
            rule = data.draw(self._any_rule.filter(lambda r: r.function.__name__ in allowed))
            arguments = {
                name: data.draw(strategy) for name, strategy in rule.arguments_strategies.items()
            }
            return rule, arguments


def install(machine: RuleBasedStateMachine) -> None:
    """Make ``machine`` draw its steps with :class:`StoryRuleChoice`."""
    if RuleStrategy is None or not hasattr(machine, "_rules_strategy"):
        raise UnsupportedHypothesis(
            "this Hypothesis has no RuleStrategy or no machine._rules_strategy; "
            "the harness's rule draw needs them (see properties/rule_choice.py)",
        )
    machine._rules_strategy = StoryRuleChoice(machine)  # pylint: disable=protected-access

"""Playing a written-down story back, with no Hypothesis generation.

``test_repro.py`` files and ``hitl-harness replay`` both come here: a fresh
machine configured as the one that failed, the recorded steps called in
order as plain methods, and the same checks after each step. The world is
deterministic, so the same steps on the same agentscope fail the same way
with the same trace. A step whose rule is unknown stops the story with
:class:`~properties.rules.story_rule.StepDoesNotApply`, naming the step.
A step whose rule exists but cannot apply (its precondition false, its
session gone) means agentscope did not reach the state the story needs, as
on a release that fixes the bug early in the story: the story ends there
(settled and checked like any other), with a warning naming the step.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from ..catalog import BY_CODE
from ..machine import HitlMachine, machine_enforcing
from ..rules.story_rule import RULES, StepDoesNotApply, StoryDiverged
from .record import Counterexample


def story_machine(enforcing, **narrowing) -> HitlMachine:
    """A fresh machine enforcing ``enforcing``, narrowed like the original
    (lists, as JSON keeps them, become the tuples the machine holds; flags
    such as ``interrupts`` stay as they are), playing a story back."""
    fixed = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in narrowing.items()
    }
    machine = machine_enforcing(*enforcing, **fixed)()
    machine.playing_back = True
    return machine


@contextlib.contextmanager
def playing(enforcing, **narrowing) -> Iterator[HitlMachine]:
    """A machine to call story steps on; leaving the block ends the story
    as Hypothesis does (``teardown``: settle and check the end state)."""
    machine = story_machine(enforcing, **narrowing)
    try:
        yield machine
    except StoryDiverged as diverged:
        warnings.warn(StoryEndedEarly(f"the story ended early: {diverged}"), stacklevel=3)
    except BaseException:
        machine.world.close()
        raise
    machine.teardown()


class StoryEndedEarly(UserWarning):
    """A played-back story could not go on the way it failed."""


def replay(counterexample: Counterexample) -> BaseException | None:
    """Play ``counterexample``'s steps; the failure they cause, if any (it
    carries its own :class:`Counterexample` with the new trace)."""
    machine = dict(counterexample.machine)
    if counterexample.code in BY_CODE:
        # A violation found on the way by another property's search is
        # enforced too, or the replay would only write it down again.
        machine["enforcing"] = sorted(set(machine["enforcing"]) | {counterexample.code})
    try:
        with playing(**machine) as story:
            for number, step in enumerate(counterexample.steps, 1):
                if step.rule == "teardown":
                    continue
                if step.rule not in RULES or not hasattr(story, step.rule):
                    raise StepDoesNotApply(
                        f"step {number}: rule {step.rule} does not apply: no such rule "
                        "on this story's machine",
                    )
                getattr(story, step.rule)(**step.arguments)
    except Exception as failure:  # pylint: disable=broad-except
        return failure
    return None

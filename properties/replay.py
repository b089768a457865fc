"""Replaying a written-down story, with no Hypothesis generation.

``test_repro.py`` files and ``hitl-harness replay`` both come here: a fresh
machine configured as the one that failed, the recorded steps called in
order as plain methods, and the same checks after each step. The world is
deterministic, so the same steps on the same agentscope fail the same way
with the same trace.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .counterexample import Counterexample
from .machine import HitlMachine, machine_enforcing


def story_machine(enforcing, **narrowing) -> HitlMachine:
    """A fresh machine enforcing ``enforcing``, narrowed like the original
    (lists, as JSON keeps them, become the tuples the machine holds; flags
    such as ``interrupts`` stay as they are)."""
    fixed = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in narrowing.items()
    }
    return machine_enforcing(*enforcing, **fixed)()


@contextlib.contextmanager
def playing(enforcing, **narrowing) -> Iterator[HitlMachine]:
    """A machine to call story steps on; leaving the block ends the story
    as Hypothesis does (``teardown``: settle and check the end state)."""
    machine = story_machine(enforcing, **narrowing)
    try:
        yield machine
    except BaseException:
        machine.w.close()
        raise
    machine.teardown()


def replay(counterexample: Counterexample) -> BaseException | None:
    """Play ``counterexample``'s steps; the failure they cause, if any (it
    carries its own :class:`Counterexample` with the new trace)."""
    try:
        with playing(**counterexample.machine) as story:
            for step in counterexample.steps:
                if step.rule != "teardown":
                    getattr(story, step.rule)(**step.arguments)
    except Exception as failure:  # pylint: disable=broad-except
        return failure
    return None

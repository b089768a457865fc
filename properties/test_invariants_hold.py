"""The property suite: one test per property of :mod:`properties.catalog`,
against agentscope as installed (``import agentscope``), each a Hypothesis
stateful run of the machine its record describes, enforcing that property
only. A property about a feature the installed release lacks is not run:
its verdict is "not applicable", and why.

Hypothesis finds a failing story; the harness shrinks it by deleting steps
(:mod:`properties.story.shrink`: seconds where Hypothesis' own shrinker took
minutes on these stories). A failure prints the shrunk program (the story),
the property that broke with what was expected and what happened, and the
bus trace; the pytest plugin writes it down as a counterexample folder.
"""
from __future__ import annotations

import pytest
from hypothesis import settings

from properties.catalog import PROPERTIES, Property
import properties.machine
from properties.machine import machine_for
from properties.story.shrink import search


@pytest.mark.properties
@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda p: p.test_id)
def test_invariant_holds(prop: Property) -> None:
    why = prop.not_applicable()
    if why is not None:
        # Its verdict is "not applicable" (the pytest plugin says why).
        pytest.skip(f"not applicable: {why}")
    steps = prop.steps_under(settings.default.stateful_step_count)
    examples = prop.examples_under(settings.default.max_examples, properties.machine.DEPLOYMENT.nodes)
    search(machine_for(prop.code), settings(stateful_step_count=steps, max_examples=examples))

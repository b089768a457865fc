"""The property suite: one test per invariant, against agentscope as
installed (``import agentscope``), each a Hypothesis stateful run of
:class:`properties.machine.HitlMachine` that enforces that invariant only.

A failure prints Hypothesis' shrunk program (the story), the invariant that
broke with what was expected and what happened, and the bus trace.
"""
from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from properties.invariants import INVARIANT_TITLES
from properties.machine import FAILS, SEVERAL_CALLS, TURNS, machine_enforcing

#: The rules a property needs beyond the seed stories of I1–I7.
RULES_FOR = {
    "I8": {"parked_messages": True},
    "I10": {"turns": (*TURNS, FAILS)},
    "I11": {"crashes": True, "turns": (*TURNS, FAILS)},
    "I12": {"turns": (*TURNS, SEVERAL_CALLS)},
    "I13": {"bus_faults": True},
}


@pytest.mark.properties
@pytest.mark.parametrize("code", sorted(INVARIANT_TITLES), ids=lambda c: f"{c}-{INVARIANT_TITLES[c]}")
def test_invariant_holds(code: str) -> None:
    run_state_machine_as_test(machine_enforcing(code, **RULES_FOR.get(code, {})))

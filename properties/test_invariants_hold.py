"""The property suite: one test per invariant, against agentscope as
installed (``import agentscope``), each a Hypothesis stateful run of
:class:`properties.machine.HitlMachine` that enforces that invariant only.

A failure prints Hypothesis' shrunk program (the story), the invariant that
broke with what was expected and what happened, and the bus trace.

Some invariants are about a part of the story the plain machine leaves out;
:data:`NARROWING` gives their machines what they need (I9 is about
interrupts, so its machine lets the user press stop).
"""
from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from properties.invariants import INVARIANT_TITLES, code_order
from properties.machine import FAILS, SEVERAL_CALLS, TURNS, machine_enforcing

#: Machine class attributes, per invariant, beyond enforcing it: the rules
#: its stories need that the seed stories of I1–I7 leave out. I9's user
#: presses stop only in the sessions they talk to (leader, solo), so its
#: stories leave the worker out: inviting one costs more than anything else
#: a story does.
NARROWING: dict[str, dict] = {
    "I8": {"parked_messages": True},
    "I9": {"interrupts": True, "cast": ("leader", "solo")},
    "I10": {"turns": (*TURNS, FAILS)},
    "I11": {"crashes": True, "turns": (*TURNS, FAILS)},
    "I12": {"turns": (*TURNS, SEVERAL_CALLS)},
    "I13": {"bus_faults": True},
}


@pytest.mark.properties
@pytest.mark.parametrize("code", sorted(INVARIANT_TITLES, key=code_order), ids=lambda c: f"{c}-{INVARIANT_TITLES[c]}")
def test_invariant_holds(code: str) -> None:
    run_state_machine_as_test(machine_enforcing(code, **NARROWING.get(code, {})))

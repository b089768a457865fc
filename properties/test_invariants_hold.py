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
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from properties.invariants import INVARIANT_TITLES, code_order
from properties.machine import BACKGROUND, FAILS, SEVERAL_CALLS, TURNS, machine_enforcing

#: Machine class attributes, per invariant, beyond enforcing it: the rules
#: its stories need that the seed stories of I1–I7 leave out. Properties
#: about one session's own runs leave the worker out of the cast (the user
#: talks to leader and solo): inviting one costs more than anything else a
#: story does, and every shrinking step replays it. I10 is about what each
#: leader is told of its members, so it plays two teams at once.
WITHOUT_WORKER = ("leader", "solo")
#: Two teams at once: the leader's crew (worker, helper) and the chief's
#: band (aide), without the solo session.
TWO_TEAMS = {
    "several_teams": True,
    "cast": ("leader", "worker", "helper", "chief", "aide"),
    "messaged": ("leader", "chief"),
}
NARROWING: dict[str, dict] = {
    "I8": {"parked_messages": True, "cast": WITHOUT_WORKER},
    "I9": {"interrupts": True, "streaming": True, "cast": WITHOUT_WORKER},
    "I10": {"turns": (*TURNS, FAILS), **TWO_TEAMS},
    "I11": {"crashes": True, "turns": (*TURNS, FAILS), "cast": WITHOUT_WORKER},
    "I12": {"turns": (*TURNS, SEVERAL_CALLS), "cast": WITHOUT_WORKER},
    "I13": {"bus_faults": True, "cast": WITHOUT_WORKER},
    "I14": {
        "background_jobs": True,
        "interrupts": True,
        "turns": (BACKGROUND, "calls GatedAction"),
        "cast": WITHOUT_WORKER,
    },
}


#: Properties whose shortest failing stories need more steps than the
#: profile's default story length leaves room for (I14: a job starts, the
#: user stops the reply, the cancel lands, the job finishes, amid every
#: other rule). Longer stories still shrink to the short one.
STORY_STEPS: dict[str, int] = {"I14": 20}


@pytest.mark.properties
@pytest.mark.parametrize("code", sorted(INVARIANT_TITLES, key=code_order), ids=lambda c: f"{c}-{INVARIANT_TITLES[c]}")
def test_invariant_holds(code: str) -> None:
    steps = max(settings.default.stateful_step_count, STORY_STEPS.get(code, 0))
    run_state_machine_as_test(
        machine_enforcing(code, **NARROWING.get(code, {})),
        settings=settings(stateful_step_count=steps),
    )

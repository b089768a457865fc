"""Discarded draws of each property's ``ci`` search, in figures.

    python scripts/discarded_draws.py [CODE ...]

For each property (all of them by default) it runs the search the property
suite runs (``ci`` profile, the property's own machine) and counts the
examples Hypothesis tried while searching and while shrinking, and how
many of them it discarded (``gave_up``: a draw thrown away before it made
a story, such as a rule whose arguments were all refused) or saw fail. The ``filter_too_much`` health check, which the profiles keep on,
fails a search that throws away too many of its first draws; these figures
show how far each search is from that.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import settings  # noqa: E402
from hypothesis.internal.observability import (  # noqa: E402
    add_observability_callback,
    remove_observability_callback,
)
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from harness.tools import profiles  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from properties.catalog import BY_CODE, PROPERTIES  # noqa: E402
from properties.machine import machine_for  # noqa: E402
from properties.violation import InvariantViolated  # noqa: E402


def count(code: str) -> tuple[str, Counter]:
    """The verdict of ``code``'s ci search and its examples by outcome."""
    outcomes: Counter = Counter()

    def note(observation) -> None:
        if observation.type == "test_case":
            phase = "shrinking" if "shrink" in (observation.how_generated or "") else "searching"
            outcomes[phase, observation.status] += 1

    ci = settings.get_profile("ci")
    steps = BY_CODE[code].steps_under(ci.stateful_step_count)
    examples = BY_CODE[code].examples_under(ci.max_examples)
    add_observability_callback(note)
    try:
        run_state_machine_as_test(machine_for(code), settings=settings(
            ci, stateful_step_count=steps, max_examples=examples))
        verdict = "holds"
    except InvariantViolated:
        verdict = "VIOLATED"
    finally:
        remove_observability_callback(note)
    return verdict, outcomes


def main(codes: list[str]) -> None:
    profiles.register()
    silence_agentscope()
    for code in codes or [p.code for p in PROPERTIES]:
        verdict, outcomes = count(code)
        line = f"{code:<4} {verdict:<8}"
        for phase in ("searching", "shrinking"):
            mine = {status: n for (p, status), n in outcomes.items() if p == phase}
            tried = sum(mine.values())
            if tried:
                line += (f"  {phase}: {tried} tried, {mine.get('gave_up', 0)} discarded "
                         f"({mine.get('gave_up', 0) / tried:.0%}), {mine.get('failed', 0)} failed")
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Speed of the harness, in figures: run it, read the numbers.

    python scripts/benchmark.py [--runs 5] [--examples 60]

Prints, from one run of this script (compare ratios, not absolutes: the
machine may be busy):

- seconds to the first I1 failure from an empty example database, over
  ``--runs`` random seeds (median, min, max) -- only meaningful against an
  agentscope that has the bug (2.0.7, 2.0.8); the same for I14 (a stopped
  reply's slow tool left running), which every release 2.0.7-2.0.11 has,
  searched as the property suite searches it;
- examples per second of the I1 property where it holds (with the reference
  fix on a release it targets, else unpatched);
- the share of an example's time spent inside agentscope's own
  ``ChatService.run`` versus the harness around it (from a profiled run).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from harness.world import agentscope_under_test  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from properties.catalog import BY_CODE  # noqa: E402
from properties.machine import machine_enforcing, machine_for  # noqa: E402
from properties.violation import InvariantViolated  # noqa: E402

BASE = dict(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    stateful_step_count=12,
)


def seconds_to_first_failure(code: str) -> float | None:
    """Wall seconds until Hypothesis first sees ``code`` fail, from an
    empty example database and a fresh random seed (shrinking not
    counted), with the machine and story length the property suite uses."""
    steps = max(BASE["stateful_step_count"], BY_CODE[code].story_steps or 0)
    start = time.perf_counter()
    try:
        run_state_machine_as_test(
            machine_for(code),
            settings=settings(
                max_examples=2000,
                phases=[Phase.generate],
                **{**BASE, "stateful_step_count": steps},
            ),
        )
    except InvariantViolated:
        return time.perf_counter() - start
    return None


def examples_per_second(examples: int) -> float:
    """Examples per second of the I1 property where it holds."""
    machine = machine_enforcing("I6")
    start = time.perf_counter()
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, phases=[Phase.generate], derandomize=True, **BASE),
    )
    return examples / (time.perf_counter() - start)


def share_inside_chat_service(examples: int) -> tuple[float, float]:
    """(seconds in ChatService.run, total seconds) over a profiled run."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run_state_machine_as_test(
            machine_enforcing("I6"),
            settings=settings(max_examples=examples, phases=[Phase.generate], derandomize=True, **BASE),
        )
    finally:
        profile.disable()
    stats = pstats.Stats(profile).stats
    total = sum(v[2] for k, v in stats.items())  # tottime over all functions
    inside = sum(
        v[3] for (path, _line, name), v in stats.items()
        if name == "run" and path.endswith("_service/_chat.py")
    )
    return inside, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--examples", type=int, default=60)
    args = parser.parse_args()
    silence_agentscope()
    print(f"benchmarking against {agentscope_under_test.describe()}")
    eps = examples_per_second(args.examples)
    print(f"examples per second (I6, holds):     {eps:.2f}")
    inside, total = share_inside_chat_service(max(10, args.examples // 3))
    print(f"time inside ChatService.run:         {inside / total:.0%} "
          f"({inside:.1f} s of {total:.1f} s profiled)")
    for code in ("I1", "I14"):
        times = [seconds_to_first_failure(code) for _ in range(args.runs)]
        found = [t for t in times if t is not None]
        label = f"seconds to first {code} failure:"
        if found:
            print(f"{label:<37}median {statistics.median(found):.1f} "
                  f"(min {min(found):.1f}, max {max(found):.1f}; found in {len(found)}/{len(times)} runs)")
        else:
            print(f"{label:<37}never failed (agentscope without the bug?)")


if __name__ == "__main__":
    main()

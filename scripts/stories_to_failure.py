"""How many stories a property's search plays before it first fails, seed
by seed: a search's luck, apart from the machine's speed.

    python scripts/stories_to_failure.py I1 [--seeds 24] [--first 0] [--cap N]

For each seed from ``--first`` on, it searches the property as the suite
searches it (its own machine and story length, Hypothesis' generate phase
only, no example database), seeded, and prints the stories up to the
failing one Hypothesis keeps (``-``: none within ``--cap`` examples; a
failure of another property counts as none), then their median (a search
that did not fail counts as more than any that did), and in how many seeds
the failure came within the ``ci`` profile's budget for the property (the
stories the suite's ``ci`` search plays on one node, and ``--cap``'s
default). The ``ci`` search is one derandomized sample: the seeds show how
much margin its verdict has. A search capped elsewhere goes another way
(Hypothesis paces its early stories by the cap), so that count is given
only when ``--cap`` is the budget.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from hypothesis import settings  # noqa: E402

from benchmark import first_failure  # noqa: E402
from harness.tools import profiles  # noqa: E402
from harness.world import agentscope_under_test  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from properties.catalog import BY_CODE  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code")
    parser.add_argument("--seeds", type=int, default=24)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--cap", type=int, default=None, help="default: the ci budget")
    args = parser.parse_args()
    profiles.register()
    budget = BY_CODE[args.code].examples_under(settings.get_profile("ci").max_examples)
    args.cap = budget if args.cap is None else args.cap
    profiles.without_local_constants()  # as the property suite searches
    silence_agentscope()
    print(f"stories to {args.code}'s first failure on {agentscope_under_test.describe()}")
    found = []
    for seed in range(args.first, args.first + args.seeds):
        seconds, played = first_failure(args.code, cap=args.cap, seed=seed)
        stories = None if seconds is None else played
        found.append(stories)
        print(f"seed {seed}: {'-' if stories is None else stories}", flush=True)
    ranked = [float("inf") if n is None else n for n in found]
    print(f"median {statistics.median(ranked):g} stories over {len(found)} seeds "
          f"({sum(n is None for n in found)} without a failure within {args.cap} examples)")
    if args.cap == budget:
        print(f"within the ci budget ({budget} stories): {sum(n is not None for n in found)} "
              f"of {len(found)} seeds")
    else:
        print(f"(the ci budget is {budget} stories: --cap {budget} counts the seeds within it)")


if __name__ == "__main__":
    main()

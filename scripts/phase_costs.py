"""Where a story's time goes, beside the floor, in one run.

    python scripts/phase_costs.py [--turns 4] [--examples 12] [--rounds 40]

The benchmark (``scripts/benchmark.py``) gives the harness's overhead as
one ratio; this script splits a story's time into its phases, so that the
cost of each can be weighed against the goal. It takes the floor and the
searches of I6 and I7 in turns, one after the other, as the benchmark
does (``--turns`` of each, ``--examples`` stories per search, seeded with
the turn's number), and times these phases of every story:

- opening its sessions and team (``World.open_cast``);
- deleting them (``AgentscopeApp.forget_story_sessions``: agentscope's
  ``delete_session``);
- the rest of closing it (``World.close`` without the deleting: the runs'
  ends once their gates open, stopping the dispatchers);
- observing the world (``World.observe``, after each step and at rest);
- the rest, beyond the price of its runs (below): interleaving, checks,
  Hypothesis, and whatever its runs cost more than the floor's do (a
  leader's invitation runs more of agentscope than a plain answer).

Each story's agentscope runs are also priced at the floor's rate (runs per
second of bare agentscope, as ``benchmark.py`` measures it), and the
ratios printed are the story's time over that price: as it is, without
the deleting, and without both opening and deleting (what sharing
sessions between stories could save at most).

The timers wrap the harness's own methods for this run only; agentscope
is not touched.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmark import RATE_MACHINES, floor, harness_rates  # noqa: E402
from harness.tools import profiles  # noqa: E402
from harness.world import agentscope_under_test  # noqa: E402
from harness.world.app import AgentscopeApp  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from harness.world.world import World  # noqa: E402

#: The timed phases: (class, method, is it a coroutine, the phase's name).
PHASES = (
    (World, "open_cast", False, "opening its sessions and team"),
    (AgentscopeApp, "forget_story_sessions", True, "deleting them"),
    (World, "close", False, "closing it (with the deleting)"),
    (World, "observe", False, "observing after each step and at rest"),
)

#: Width of the table's first column.
WIDTH = 48


@contextmanager
def timed(cls: type, name: str, is_async: bool, spent: Counter, phase: str):
    """``cls.name`` adding its wall seconds to ``spent[phase]``, until the
    block ends."""
    original = getattr(cls, name)
    if is_async:
        async def timer(*args, **kwargs):
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - start
    else:
        def timer(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - start
    setattr(cls, name, timer)
    try:
        yield
    finally:
        setattr(cls, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--examples", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    profiles.without_local_constants()  # as the property suite searches
    silence_agentscope()
    print(f"where a story's time goes, on {agentscope_under_test.describe()}")
    floor(args.rounds // 4, 3)  # warming up
    for code in RATE_MACHINES:
        harness_rates(3, seed=args.turns, code=code)
    for code in RATE_MACHINES:
        spent: Counter = Counter()
        floors, stories, runs, seconds = [], 0, 0, 0.0
        for turn in range(args.turns):
            floors.append(floor(args.rounds, 3))
            silence_agentscope()
            with ExitStack() as timers:
                for cls, name, is_async, phase in PHASES:
                    timers.enter_context(timed(cls, name, is_async, spent, phase))
                played, ran, took = harness_rates(args.examples, seed=turn, code=code)
            stories, runs, seconds = stories + played, runs + ran, seconds + took
        floor_rate = sum(n for n, _ in floors) / sum(t for _, t in floors)
        per_story = {phase: 1000 * s / stories for phase, s in spent.items()}
        whole = 1000 * seconds / stories
        priced = 1000 * runs / floor_rate / stories
        opening = per_story["opening its sessions and team"]
        deleting = per_story["deleting them"]
        closing = per_story.pop("closing it (with the deleting)") - deleting
        per_story["the rest of closing it"] = closing
        rest = whole - priced - sum(per_story.values())
        print(f"\n{code}'s search: {stories} stories, {runs} agentscope runs, "
              f"{seconds:.1f} s; the floor {floor_rate:.1f} runs per second")
        rows = [("all of it", whole),
                (f"its runs, at the floor's rate ({runs / stories:.2f} runs)", priced),
                *per_story.items(),
                ("the rest, beyond its runs' price", rest)]
        print(f"  {'per story':<{WIDTH}}{'ms':>8}")
        for label, ms in rows:
            print(f"  {label:<{WIDTH}}{ms:>8.1f}")
        print(f"  ratio {whole / priced:.2f}x; without deleting {(whole - deleting) / priced:.2f}x; "
              f"without opening and deleting {(whole - deleting - opening) / priced:.2f}x")


if __name__ == "__main__":
    main()

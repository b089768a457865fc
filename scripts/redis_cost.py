"""What an example costs in Redis mode, next to the fake bus, in one run.

    python scripts/redis_cost.py [--examples 30] [--nodes 2]

Plays the same derandomized search of I6 (one run per session; it holds,
so nothing is shrunk) on the fake bus and on agentscope's
``RedisMessageBus`` over a real redis-server with ``--nodes`` nodes, and
prints seconds per example and bus operations per second for each, and
their ratio. The target is a ratio of at most 3. Compare ratios, not
absolutes: the machine may be busy.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from harness.world import agentscope_under_test  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from properties.catalog import BY_CODE  # noqa: E402
from properties.machine import machine_enforcing  # noqa: E402

TARGET_RATIO = 3.0


def cost(code: str, examples: int, bus: str, nodes: int) -> tuple[float, float]:
    """Seconds per example, and bus operations per second, of ``code``'s
    search on ``bus`` with ``nodes`` nodes."""
    machine = machine_enforcing(code, **BY_CODE[code].machine, bus=bus, nodes=nodes)
    played = {"examples": 0, "operations": 0}

    class Counted(machine):
        def teardown(self) -> None:
            played["examples"] += 1
            played["operations"] += len(self.world.interleaver.trace.entries)
            super().teardown()

    started = time.perf_counter()
    run_state_machine_as_test(
        Counted,
        settings=settings(
            max_examples=examples, derandomize=True, database=None, deadline=None,
            stateful_step_count=10, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )
    took = time.perf_counter() - started
    return took / played["examples"], played["operations"] / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--property", default="I6")
    options = parser.parse_args()
    silence_agentscope()
    print(f"agentscope {agentscope_under_test.describe()}")
    fake = cost(options.property, options.examples, "fake", 1)
    redis = cost(options.property, options.examples, "redis", options.nodes)
    print(f"{options.property}, {options.examples} examples each:")
    print(f"  fake bus:                  {fake[0]:.3f} s/example, {fake[1]:,.0f} bus operations/s")
    print(f"  redis, {options.nodes} node(s):         {redis[0]:.3f} s/example, {redis[1]:,.0f} bus operations/s")
    ratio = redis[0] / fake[0]
    verdict = "within" if ratio <= TARGET_RATIO else "over"
    print(f"summary: a Redis-mode example costs {ratio:.2f}x a fake-bus one ({verdict} the {TARGET_RATIO:g}x target)")


if __name__ == "__main__":
    main()

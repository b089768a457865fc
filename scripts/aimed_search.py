"""Does aiming the search at the risky windows reach more of them? In
figures, in one run.

    python scripts/aimed_search.py [--examples 50] [CODE ...]

For each property (by default those that hold on 2.0.8) it runs the search
the property suite runs (``ci`` profile, derandomized, the property's own
machine and step count; no shrinking) three ways, and counts the windows
(``properties/windows.py``) its stories reached:

- **uniform**: Hypothesis' own choices, as the suite searches;
- **aimed, one score**: each story reports, through Hypothesis'
  ``target()``, how many of the property's windows it reached, so that the
  targeting phase climbs towards stories that reach them all;
- **aimed, a score per window**: each window's count is its own target.

The last lines compare windows reached (each property's distinct windows,
summed) and windows reached per second. (The machines here are subclasses,
so their derandomized draws differ from the suite's own.) The suite keeps
uniform choices: on 2.0.8 with 50 examples, uniform reached 15 of 15
windows (0.122 per second), the one-score aim 13 (0.085 per second), the
per-window aim 13 (0.081 per second); both aims lost two of I3's windows.
The draws follow the machine's code, so another version of this script
draws other stories: an earlier one measured 12, 11 and 12 of 15, aiming
winning a window in I4 and losing one in I12.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import Phase, settings, target  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from harness.tools import profiles  # noqa: E402
from harness.world import agentscope_under_test  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from properties.catalog import BY_CODE  # noqa: E402
from properties.machine import WINDOWS_REACHED, machine_for  # noqa: E402

#: The properties that hold on 2.0.8 (a failing search stops early, so its
#: windows say little about the search).
HOLDING = ("I3", "I4", "I5", "I6", "I7", "I10", "I12", "I15")


def _one_score(code: str, reached: dict) -> None:
    target(float(sum(1 for w in BY_CODE[code].windows if reached.get(w))), label=f"{code} windows")


def _score_per_window(code: str, reached: dict) -> None:
    for window in BY_CODE[code].windows:
        target(float(reached.get(window, 0)), label=window)


AIMS = {"uniform": None, "aimed, one score": _one_score, "aimed, a score per window": _score_per_window}


def search(code: str, examples: int, aim) -> tuple[dict, float]:
    """The windows ``code``'s search reached (window → stories), and its
    wall seconds."""
    reached: dict[str, int] = {}
    base = machine_for(code)

    class Aimed(base):  # type: ignore[valid-type, misc]
        def teardown(self) -> None:
            before = Counter(WINDOWS_REACHED.get(code, ()))
            super().teardown()  # counts the story's windows into WINDOWS_REACHED
            counts = WINDOWS_REACHED.get(code, Counter()) - before
            for window in counts:
                reached[window] = reached.get(window, 0) + 1
            if aim is not None:
                aim(code, counts)

    steps = BY_CODE[code].steps_under(settings.default.stateful_step_count)
    start = time.perf_counter()
    try:
        run_state_machine_as_test(Aimed, settings=settings(
            max_examples=BY_CODE[code].examples_under(examples), stateful_step_count=steps,
            phases=[p for p in settings.default.phases if p is not Phase.shrink]))
    except Exception:  # pylint: disable=broad-except  # a violation ends the search; its windows still count
        pass
    return reached, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=50)
    parser.add_argument("codes", nargs="*", default=list(HOLDING))
    args = parser.parse_args()
    profiles.register()
    settings.load_profile("ci")
    profiles.without_local_constants()  # as the property suite searches
    silence_agentscope()
    print(f"aiming the search, against {agentscope_under_test.describe()}")
    totals = {name: [0, 0, 0.0] for name in AIMS}
    for code in args.codes:
        for name, aim in AIMS.items():
            reached, seconds = search(code, args.examples, aim)
            distinct = sum(1 for w in BY_CODE[code].windows if reached.get(w))
            totals[name][0] += distinct
            totals[name][1] += len(BY_CODE[code].windows)
            totals[name][2] += seconds
            shown = ", ".join(f"{w} ×{reached.get(w, 0)}" for w in BY_CODE[code].windows)
            print(f"{code:<4} {name:<26} {distinct}/{len(BY_CODE[code].windows)} in {seconds:5.1f}s  ({shown})",
                  flush=True)
    for name, (distinct, of, seconds) in totals.items():
        print(f"{name:<26} windows reached {distinct}/{of} in {seconds:.1f}s: {distinct / seconds:.3f} per second")


if __name__ == "__main__":
    main()

"""Speed of the harness, beside its two baselines, in one run.

    python scripts/benchmark.py [--runs 5] [--turns 8] [--rounds 40] [--session-runs 3] [--naive 3] [--examples 12] [--findings F1,F2,...]

Prints three measures side by side (compare ratios within one run: the
machine may be shared, and its speed drifts by a third within seconds).
The floor, the naive approach and the harness take ``--turns`` short turns
each, one after the other, after one turn to warm up; each rate is what
all its turns did over all their time. Short turns expose every measure
to the same spells of the machine, where one long measure each (or the
best of a few) let one spell decide the ratio.

- **floor**: bare agentscope, ``ChatService`` runs per second on its own
  ``InMemoryMessageBus``, with the same storage as the harness (SQL on a
  sqlite file in ``/dev/shm``), the same scripted model and tools, on a
  plain asyncio loop: the user messages a session, the run answers, again
  and again (``--rounds`` per turn), a fresh session every
  ``--session-runs`` runs, as a story's sessions are fresh and see a few
  runs each. (Each run reads its session's history: one session for every
  round measured a floor that slowed as it went, from about 40 runs per
  second to 18 after 200 rounds.)
- **naive**: what an example-based test would do: a fresh app and
  ``asyncio.run`` per example, one fixed trigger (the user's message makes
  the model call ``GatedAction`` while a team member delivers to the inbox,
  F1's story), natural scheduling (``--naive`` examples per turn); examples per
  second, and how many examples showed F1's error reply;
- **harness**: agentscope runs per second inside the property suite's
  examples and examples per second, over the searches of I6 (leader and
  solo, bus faults) and I7 (the full cast, with invitations) as the suite
  runs them (``--examples`` of each per turn, each turn's searches seeded
  with the turn's number; each machine's own ratio is printed too), and
  seconds to the first failure of each finding the installed release has,
  searched as the property suite searches it (median of ``--runs``
  searches from an empty example database, seeded 0, 1, 2, ...; shrinking
  not counted), with the stories each search played up to the failing
  one. The seeds make those stories the same on every run, so that only
  the machine's speed varies between runs (a search's luck over more
  seeds: ``scripts/stories_to_failure.py``).

- **own**: the harness's own cost, a story's time over the time
  agentscope's own calls take inside it (its runs, its storage calls, its
  reads), over ``--own-turns`` turns of I6's and I7's searches (seeded 0,
  1, ...), sampled every millisecond of wall time: each sample counts for
  agentscope when the loop's thread is in agentscope's code (or in code
  agentscope called: SQLAlchemy, pydantic) or waiting on agentscope's
  storage thread, for the harness otherwise (``scripts/own_time.py`` says
  how; nothing of agentscope or the harness is wrapped). The floor is
  sampled the same way, as a check: bare agentscope should come out near
  1.0x (its scripted model and the script's own loop are not agentscope's).

The last line reads ``summary: own X.XXx, overhead X.XXx floor, F1 S.Ss,
worst finding S.Ss (Fn)``: own as above (target 1.25x); the overhead is
the floor's runs per second over the harness's; F1 is only searched on the
releases that have it (2.0.7, 2.0.8); targets F1 2 s, every finding 10 s.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "findings" / "confirm"))

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from packaging.version import Version  # noqa: E402

from _app import app_on, hint  # noqa: E402
from own_time import Samples, Sampler, signals_to_this_thread_only  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus  # noqa: E402
from fakes.model import CallTool  # noqa: E402
from harness.tools import profiles  # noqa: E402
from harness.world import agentscope_under_test  # noqa: E402
from harness.world.quiet import silence_agentscope  # noqa: E402
from harness.world.stage import Stage  # noqa: E402
from properties.catalog import BY_CODE  # noqa: E402
from properties.machine import machine_for  # noqa: E402
from properties.violation import InvariantViolated  # noqa: E402

BASE = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), stateful_step_count=10)

#: Each finding, the property whose search finds it, and the releases that
#: have it (docs/findings.md).
FINDINGS = {
    "F1": ("I1", lambda v: v < Version("2.0.9")),
    "F2": ("I8", lambda v: True),
    "F3": ("I9", lambda v: True),
    "F4": ("I13", lambda v: True),
    "F5": ("I11", lambda v: True),
    "F6": ("I14", lambda v: True),
}

#: Give up on a finding's search after this many examples.
MAX_EXAMPLES = 1000


def _scratch() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="bench-", dir=str(shm) if shm.is_dir() else None))


# ── the floor ─────────────────────────────────────────────────────────


async def _floor(rounds: int, session_runs: int) -> tuple[int, float]:
    basedir = _scratch()
    try:
        async with app_on(InMemoryMessageBus(), basedir=basedir) as app:
            agent = await app.add_agent("solo")
            spent = 0.0
            for done in range(rounds):
                if done % session_runs == 0:
                    session = await app.add_session(agent, "solo")
                start = time.perf_counter()
                assert await app.post_chat(agent, session, "please help") == 200
                await app.wait_run_done(session)
                spent += time.perf_counter() - start
            return rounds, spent
    finally:
        shutil.rmtree(basedir, ignore_errors=True)


def floor(rounds: int, session_runs: int) -> tuple[int, float]:
    """Bare agentscope: (runs, seconds the runs took), a fresh session every
    ``session_runs`` runs (its making not timed)."""
    return asyncio.run(_floor(rounds, session_runs))


# ── the naive approach ────────────────────────────────────────────────


async def _naive_example() -> bool:
    """One example: a fresh app, F1's trigger, natural scheduling; whether
    an error reply was published."""
    basedir = _scratch()
    try:
        async with app_on(InMemoryMessageBus(), basedir=basedir) as app:
            agent = await app.add_agent("leader")
            session = await app.add_session(agent, "leader")
            ui = await app.tap(session)
            app.script("leader").add(CallTool("GatedAction", {"note": "deploy"}))
            await asyncio.gather(
                app.post_chat(agent, session, "please help"),
                app.deliver(agent, session, hint("status update", "team member")),
            )
            await app.wait_run_done(session)
            for _ in range(3):  # a wake-up the delivery queued, if any
                await asyncio.sleep(0)
                await app.wait_run_done(session)
            return any(e.get("finished_reason") == "error" for e in ui.reply_ends())
    finally:
        shutil.rmtree(basedir, ignore_errors=True)


def naive(examples: int) -> tuple[int, float, int]:
    """(examples, seconds they took, examples that showed F1's error reply)."""
    start = time.perf_counter()
    found = sum(asyncio.run(_naive_example()) for _ in range(examples))
    return examples, time.perf_counter() - start, found


# ── the harness ───────────────────────────────────────────────────────


def _telling(machine: type, story_ended) -> type:
    """``machine``, calling ``story_ended(story)`` as each story's teardown
    ends (whether it raised or not)."""
    teardown = machine.teardown

    def teardown_then_tell(self) -> None:
        try:
            teardown(self)
        finally:
            story_ended(self)

    machine.teardown = teardown_then_tell
    return machine


def _search(code: str, story_ended, examples: int, seed: int | None) -> None:
    """Property ``code``'s search as the suite runs it (its machine and
    story length, Hypothesis' generate phase only, no example database),
    seeded with ``seed``, calling ``story_ended(story)`` as each story ends;
    what the search raises goes on."""
    machine = _telling(machine_for(code), story_ended)
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed  # pylint: disable=protected-access
    steps = BY_CODE[code].steps_under(BASE["stateful_step_count"])
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, phases=[Phase.generate],
                          **{**BASE, "stateful_step_count": steps}),
    )


#: The machines whose examples the harness's rates are taken in, as the
#: suite searches them: I6's (leader and solo, bus faults) and I7's (the
#: full cast, whose leader invites the worker). Both hold on the releases
#: the suite expects verdicts of, so their searches play every example.
RATE_MACHINES = ("I6", "I7")


def harness_rates(examples: int, seed: int, code: str) -> tuple[int, int, float]:
    """(stories, agentscope runs, seconds) in ``examples`` examples of
    property ``code``'s search as the suite runs it, seeded with ``seed``
    (a search that fails ends early; what it played still counts)."""
    stories, runs = [0], [0]

    def count_runs(story) -> None:
        stories[0] += 1
        runs[0] += len(story.world.app.registry.spawned)

    Stage.shared()  # the process' storage and agents, opened once (not an example's cost)
    start = time.perf_counter()
    try:
        _search(code, count_runs, examples, seed)
    except InvariantViolated:
        pass
    return stories[0], runs[0], time.perf_counter() - start


def own_samples(examples: int, turns: int, code: str) -> Samples:
    """Property ``code``'s search (``examples`` stories a turn, seeded 0
    to ``turns - 1``), sampled for whose code runs (``own_time.py``)."""
    sampler = Sampler()
    for turn in range(turns):
        Stage.shared()  # opened before, outside the samples
        with sampler:
            harness_rates(examples, seed=turn, code=code)
    return sampler.samples


def _bounds(samples: Samples) -> str:
    return (f"{samples.own_without_loop():.2f}x with the loop as the harness's, "
            f"{samples.own_busy():.2f}x without the storage wait")


def floor_samples(rounds: int, session_runs: int) -> Samples:
    """The floor sampled the same way: a check, as bare agentscope should
    come out near 1.0x."""
    with Sampler() as sampler:
        floor(rounds, session_runs)
    return sampler.samples


def first_failure(code: str, cap: int = MAX_EXAMPLES, seed: int | None = None) -> tuple[float | None, int]:
    """Wall seconds until a search of property ``code`` first fails
    (``None``: it did not within ``cap`` examples, or failed otherwise), as
    the property suite searches it, from an empty example database
    (``seed``: seeded); and the stories it played up to that failing one
    (or all it played).

    The failing story Hypothesis keeps is the last but one it plays: it
    stops searching there and replays it once to report it. The clock
    stops as that story ends. An earlier story may have failed too, and be
    discarded by Hypothesis (a story that ran out of choices before its
    end, whose failure showed in its teardown): it is not counted."""
    ended: list[tuple[float, bool]] = []  # each story's end, and whether it failed

    def count_stories(story) -> None:
        ended.append((time.perf_counter(), story._failed))  # pylint: disable=protected-access

    start = time.perf_counter()
    try:
        _search(code, count_stories, cap, seed)
    except InvariantViolated as violation:
        kept = len(ended) - 1
        if violation.code == code and kept >= 1 and ended[kept - 1][1]:
            return ended[kept - 1][0] - start, kept
    except Exception:  # pylint: disable=broad-except
        pass  # another failure: no finding of ``code``
    return None, len(ended)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--session-runs", type=int, default=3)
    parser.add_argument("--naive", type=int, default=3)
    parser.add_argument("--examples", type=int, default=12)
    parser.add_argument("--own-turns", type=int, default=2)
    parser.add_argument("--findings", default=",".join(FINDINGS))
    args = parser.parse_args()
    signals_to_this_thread_only()  # before any thread starts: the sampler's signal comes here
    profiles.without_local_constants()  # as the property suite searches
    silence_agentscope()
    version = Version(agentscope_under_test.version())
    print(f"benchmarking against {agentscope_under_test.describe()}")
    floor(args.rounds // 4, args.session_runs)  # warming up
    naive(1)
    harness_rates(3, seed=args.turns, code=RATE_MACHINES[0])
    floors, naives = [], []
    by_machine: dict[str, list[tuple[int, int, float]]] = {code: [] for code in RATE_MACHINES}
    for turn in range(args.turns):
        floors.append(floor(args.rounds, args.session_runs))
        naives.append(naive(args.naive))
        silence_agentscope()
        for code in RATE_MACHINES:
            by_machine[code].append(harness_rates(args.examples, seed=turn, code=code))
    # Per turn: (stories, runs, seconds) over every machine.
    harnesses = [tuple(map(sum, zip(*turn))) for turn in zip(*by_machine.values())]
    floor_rate = sum(n for n, _ in floors) / sum(t for _, t in floors)
    naive_examples = sum(n for n, _, _ in naives) / sum(t for _, t, _ in naives)
    naive_found = sum(found for _, _, found in naives)
    harness_seconds = sum(t for _, _, t in harnesses)
    harness_runs = sum(n for _, n, _ in harnesses) / harness_seconds
    harness_examples = sum(n for n, _, _ in harnesses) / harness_seconds
    overhead = floor_rate / harness_runs
    ratios = sorted((f / ft) / (h / ht) for (f, ft), (_, h, ht) in zip(floors, harnesses))
    print(f"{args.turns} turns each, one after the other: floor runs per second "
          f"{', '.join(f'{n / t:.1f}' for n, t in floors)}; harness "
          f"{', '.join(f'{n / t:.1f}' for _, n, t in harnesses)} "
          f"(a turn's ratio {ratios[0]:.2f}x to {ratios[-1]:.2f}x)")
    for code, turns in by_machine.items():
        stories, runs, seconds = map(sum, zip(*turns))
        print(f"  inside {code}'s search: {runs / seconds:.1f} runs per second "
              f"({floor_rate * seconds / runs:.2f}x floor), {stories / seconds:.2f} examples per second")
    print(f"{'':<34}{'floor':>10}{'naive':>10}{'harness':>10}")
    print(f"{'agentscope runs per second':<34}{floor_rate:>10.1f}{'-':>10}{harness_runs:>10.1f}")
    print(f"{'examples per second':<34}{'-':>10}{naive_examples:>10.2f}{harness_examples:>10.2f}")
    print(f"naive: F1's error reply in {naive_found} of {args.naive * args.turns} examples "
          "(fixed trigger, natural scheduling)")
    by_search = {code: own_samples(args.examples, args.own_turns, code) for code in RATE_MACHINES}
    searches = Samples()
    for samples in by_search.values():
        searches.add(samples)
    check = floor_samples(args.rounds, args.session_runs)
    print(f"own: the floor (bare agentscope, driven by this script) comes out at {check.own():.2f}x "
          f"({check.describe()})")
    for code, samples in by_search.items():
        print(f"  inside {code}'s search: own {samples.own():.2f}x; {_bounds(samples)} ({samples.describe()})")
    own = searches.own()
    print(f"own {own:.2f}x over both searches; {_bounds(searches)} ({args.own_turns} turns each, "
          f"seeds 0-{args.own_turns - 1}; {searches.describe()})")
    firsts: dict[str, float | None] = {}
    for finding in filter(None, args.findings.split(",")):
        code, has_it = FINDINGS[finding]
        if not has_it(version):
            print(f"{finding} ({code}): not in agentscope {version}")
            continue
        searches = [first_failure(code, seed=seed) for seed in range(args.runs)]
        times = [seconds for seconds, _ in searches]
        found = sorted(t for t in times if t is not None)
        if len(found) * 2 > len(times):
            firsts[finding] = statistics.median(times if len(found) == len(times) else
                                                found + [float("inf")] * (len(times) - len(found)))
        else:
            firsts[finding] = None
        shown = ", ".join(("-" if t is None else f"{t:.1f}") + f" [{n}]" for t, n in searches)
        median = "not found" if firsts[finding] is None else f"median {firsts[finding]:.1f} s"
        print(f"seconds [stories] to first {finding} ({code}): {median:<16} "
              f"({shown}; seeds 0-{args.runs - 1}, each at most {MAX_EXAMPLES} examples)")
    f1 = "F1 n/a" if "F1" not in firsts else (
        "F1 not found" if firsts["F1"] is None else f"F1 {firsts['F1']:.1f}s")
    worst_finding = max(firsts, key=lambda f: float("inf") if firsts[f] is None else firsts[f], default=None)
    if worst_finding is None:
        worst = "worst finding n/a"
    elif firsts[worst_finding] is None:
        worst = f"worst finding not found ({worst_finding})"
    else:
        worst = f"worst finding {firsts[worst_finding]:.1f}s ({worst_finding})"
    print(f"summary: own {own:.2f}x, overhead {overhead:.2f}x floor, {f1}, {worst}")


if __name__ == "__main__":
    main()

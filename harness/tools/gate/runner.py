"""Running the property suite inside one gate environment.

The suite runs in its own process group (:mod:`.processes`, through anyio)
with the environment's Python, the harness's packages on ``PYTHONPATH`` and
the harness's pytest plugin asked for by name. Verdicts come back through
the plugin's ``--hitl-verdicts-json``; ``--hitl-verdict-lines`` lets the gate show
each one as it comes, and ``--hitl-progress-file`` which property's search is
under way and whether it is shrinking (:mod:`harness.tools.search_progress`).
With a budget, a suite still running when it runs out is ended, with its
xdist workers, and did not finish.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..pytest_plugin import VERDICT_LINE
from ..search_progress import Reader
from . import processes
from .environments import harness_path

#: Seconds between two reads of the suite's progress file.
FOLLOW_EVERY = 0.5


@dataclass
class SuiteResult:
    """What one run of the property suite said."""

    verdicts: dict[str, dict] = field(default_factory=dict)
    reference_fix: bool = False
    broken: str | None = None  # why the run gave no verdicts
    log: Path | None = None
    #: The suite was ended when its budget ran out (``broken`` says so).
    did_not_finish: bool = False
    #: The verdict lines heard as they came (``I1 VIOLATED ...``).
    heard: list[str] = field(default_factory=list)


async def run_suite(
    python: Path,
    *,
    log: Path,
    profile: str,
    with_fix: bool,
    counterexamples: Path,
    workers: int,
    say: Callable[[str], None],
    budget: float | None = None,
    on_event: Callable[[dict], None] | None = None,
    deployment: tuple[str, ...] = (),
) -> SuiteResult:
    """Run every property with ``python`` (pytest's output goes to
    ``log``, ``deployment`` are extra options such as ``--hitl-bus redis``);
    ``say`` hears each verdict as it comes, ``on_event`` each progress
    event; a suite still running after ``budget`` seconds is ended
    (``None``: no budget)."""
    verdicts_file = Path(tempfile.mkstemp(prefix="verdicts-", suffix=".json")[1])
    progress_file = Path(tempfile.mkstemp(prefix="progress-", suffix=".jsonl")[1])
    command = [
        str(python), "-m", "pytest", str(harness_path() / "properties"),
        "-p", "harness.tools.pytest_plugin",
        "-p", "no:cacheprovider",
        "--rootdir", str(harness_path()),
        "-o", "asyncio_default_fixture_loop_scope=function",
        f"--hypothesis-profile={profile}",
        f"--hitl-counterexamples={counterexamples.resolve()}",
        f"--hitl-verdicts-json={verdicts_file}",
        f"--hitl-progress-file={progress_file}",
        "--hitl-verdict-lines",
        "-q",
        *deployment,
    ]
    if workers > 1:
        command += ["-n", str(workers)]
    if with_fix:
        command.append("--hitl-reference-fix")
    result = SuiteResult(log=log)
    reader = Reader(progress_file)

    def heard(line: str) -> None:
        out.write(line + "\n")
        if line.startswith(VERDICT_LINE):
            verdict = line[len(VERDICT_LINE):].strip()
            result.heard.append(verdict)
            say(verdict)

    try:
        with log.open("w", encoding="utf-8") as out:
            async with anyio.create_task_group() as following:
                following.start_soon(_follow, reader, on_event)
                try:
                    done = await processes.stream(command, env=environ(), on_line=heard,
                                                  limit=budget)
                except processes.TimedOut:
                    done = None
                following.cancel_scope.cancel()
        _hand_on(reader, on_event)
        text = verdicts_file.read_text(encoding="utf-8") if done is not None else ""
    finally:
        verdicts_file.unlink(missing_ok=True)
        progress_file.unlink(missing_ok=True)
    if done is None:
        result.did_not_finish = True
        result.broken = (f"its suite did not finish within its budget of {minutes(budget)} "
                         f"and was ended; {len(result.heard)} properties had verdicts"
                         + (f" ({'; '.join(result.heard)})" if result.heard else "")
                         + f" (log: {log})")
        return result
    try:
        written = json.loads(text or "{}")
    except ValueError:
        written = {}
    result.verdicts = written.get("verdicts", {})
    result.reference_fix = written.get("reference_fix", False)
    if not result.verdicts or done.returncode not in (0, 1):
        result.broken = f"pytest exited {done.returncode}: {done.last_line()} (log: {log})"
    return result


def minutes(seconds: float) -> str:
    """``1 min``, ``2.5 min``; under a minute ``8 s``."""
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


async def _follow(reader: Reader, on_event) -> None:
    """Hand on the suite's progress events as they are written."""
    while True:
        _hand_on(reader, on_event)
        await anyio.sleep(FOLLOW_EVERY)


def _hand_on(reader: Reader, on_event) -> None:
    for event in reader.new_events():
        if on_event is not None:
            on_event(event)


def environ() -> dict[str, str]:
    """This process' environment, with only the harness on PYTHONPATH."""
    values = dict(os.environ)
    values["PYTHONPATH"] = str(harness_path())
    values.pop("VIRTUAL_ENV", None)
    return values

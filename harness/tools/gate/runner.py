"""Running the property suite inside one gate environment.

The suite runs in its own process with the environment's Python, the
harness's packages on ``PYTHONPATH`` and the harness's pytest plugin asked
for by name. Verdicts come back through the plugin's ``--verdicts-json``;
``--verdict-lines`` lets the gate show each one as it comes.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..pytest_plugin import VERDICT_LINE
from .environments import Environment, harness_path

#: Lines of pytest's output kept when the run itself broke.
TAIL_LINES = 15


@dataclass
class SuiteResult:
    """What one run of the property suite said."""

    verdicts: dict[str, dict] = field(default_factory=dict)
    reference_fix: bool = False
    broken: str | None = None  # why the run gave no verdicts
    log: Path | None = None


def probe(env: Environment) -> dict:
    """The probe's answer (see :mod:`harness.tools.gate.probe`)."""
    done = subprocess.run(
        [str(env.python), "-m", "harness.tools.gate.probe"],
        capture_output=True,
        text=True,
        env=_environ(),
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"drivable": False, "missed": f"the probe crashed: {tail}"}
    return json.loads(lines[-1])


def run_suite(
    python: Path,
    *,
    log: Path,
    profile: str,
    with_fix: bool,
    counterexamples: Path,
    workers: int,
    say: Callable[[str], None],
) -> SuiteResult:
    """Run every property with ``python`` (pytest's output goes to
    ``log``); ``say`` hears each verdict as it comes."""
    verdicts_file = Path(tempfile.mkstemp(prefix="verdicts-", suffix=".json")[1])
    command = [
        str(python), "-m", "pytest", str(harness_path() / "properties"),
        "-p", "harness.tools.pytest_plugin",
        "-p", "no:cacheprovider",
        "--rootdir", str(harness_path()),
        "-o", "asyncio_default_fixture_loop_scope=function",
        f"--hypothesis-profile={profile}",
        f"--counterexamples={counterexamples.resolve()}",
        f"--verdicts-json={verdicts_file}",
        "--verdict-lines",
        "-q",
    ]
    if workers > 1:
        command += ["-n", str(workers)]
    if with_fix:
        command.append("--reference-fix")
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=_environ(),
        )
        for line in process.stdout:
            out.write(line)
            if line.startswith(VERDICT_LINE):
                say(line[len(VERDICT_LINE):].strip())
        process.wait()
    result = SuiteResult(log=log)
    try:
        written = json.loads(verdicts_file.read_text(encoding="utf-8") or "{}")
    finally:
        verdicts_file.unlink(missing_ok=True)
    result.verdicts = written.get("verdicts", {})
    result.reference_fix = written.get("reference_fix", False)
    if not result.verdicts or process.returncode not in (0, 1):
        tail = log.read_text(encoding="utf-8").strip().splitlines()[-TAIL_LINES:]
        last = next((l for l in reversed(tail) if l.strip()), "no output")
        result.broken = f"pytest exited {process.returncode}: {last.strip()} (log: {log})"
    return result


def _environ() -> dict[str, str]:
    """This process' environment, with only the harness on PYTHONPATH."""
    environ = dict(os.environ)
    environ["PYTHONPATH"] = str(harness_path())
    environ.pop("VIRTUAL_ENV", None)
    return environ

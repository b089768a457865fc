"""The gate itself: every input checked, then the baseline and every SPEC
through environment, probe and suite, each candidate compared with the
baseline and the known violations."""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from . import compare, environments, inputs, reports, runner
from .outcomes import Exit, Row, exit_code


def _say(message: str) -> None:
    """Progress, on stderr (the table goes to stdout)."""
    print(message, file=sys.stderr, flush=True)


def gate(
    spec_texts: list[str],
    *,
    with_fix: bool = False,
    profile: str = "ci",
    counterexamples: Path = Path("counterexamples"),
    workers: int = 2,
    json_path: Path | None = None,
    junit_path: Path | None = None,
    baseline: str | None = None,
    baseline_json: Path | None = None,
    known: Path | None = None,
) -> Exit:
    """Gate every SPEC (against the baseline, if any); print the table;
    return the exit code. Every input is checked before any work."""
    try:
        plan = inputs.prepare(
            spec_texts, baseline=baseline, baseline_json=baseline_json, known_path=known,
            json_path=json_path, junit_path=junit_path, counterexamples=counterexamples,
        )
    except inputs.Refused as refused:
        _say(f"hitl-harness gate: error: {refused}")
        return refused.code

    def run(target) -> Row:
        return _gate_one(target, with_fix=with_fix, profile=profile,
                         counterexamples=counterexamples, workers=workers)

    base = plan.baseline_row
    if plan.baseline is not None:
        _say(f"[{plan.baseline.name}] the baseline")
        base = run(plan.baseline)
        base.role, base.new = "baseline", []
    rows = [base] if base is not None else []
    for target in plan.candidates:
        if plan.baseline is not None and target.identity == plan.baseline.identity:
            row = replace(base, name=target.name, role="candidate", new=None)  # ran once
        else:
            row = run(target)
        if row.verdicts:
            compare.classify(row, base, plan.known)
        rows.append(row)
    code = exit_code(rows)
    import reference_fix  # pylint: disable=import-outside-toplevel

    print()
    print(f"hitl-harness gate (profile {profile}; reference fix "
          f"{'applied where it targets the release' if with_fix else 'off'})")
    if with_fix:
        print("reference fixes:\n  " + reference_fix.describe().replace("\n", "\n  "))
    print(reports.table(rows))
    comparison = reports.comparison(rows)
    if comparison:
        print("\n" + comparison)
    print(f"\nexit {int(code)}: {reports.meaning(rows, code)}")
    if json_path is not None:
        reports.write_json(rows, json_path, code)
    if junit_path is not None:
        reports.write_junit(rows, junit_path)
    return code


def _relative(verdict: dict) -> dict:
    """A verdict whose counterexample path is relative to the working
    directory when it lies under it (what a person and a CI artifact see)."""
    folder = verdict.get("counterexample")
    if folder and Path(folder).is_relative_to(Path.cwd()):
        return {**verdict, "counterexample": str(Path(folder).relative_to(Path.cwd()))}
    return verdict


def _gate_one(target, *, with_fix, profile, counterexamples, workers) -> Row:
    row = Row(name=target.name, version=target.version or None)
    say = lambda message: _say(f"[{target.name}] {message}")  # noqa: E731
    started = time.monotonic()
    try:
        env = environments.ensure(target, say=say)
    except environments.InstallFailed as failed:
        say(f"install failed: {failed}")
        return row.could_not_run(Exit.INSTALL_FAILED, str(failed))
    row.seconds["environment"] = round(time.monotonic() - started, 1)
    say(f"environment {'reused from the cache' if env.cached else 'built'} "
        f"in {row.seconds['environment']} s: {env.folder}")
    found = runner.probe(env)
    row.version, row.path = found.get("version") or row.version, found.get("path")
    if not found.get("drivable"):
        say(f"cannot drive agentscope {row.version}: {found.get('missed')}")
        return row.could_not_run(Exit.CANNOT_DRIVE, found.get("missed") or "unknown")
    apply_fix = with_fix and not found.get("fix_refusal")
    row.fix = (
        f"on ({','.join(found.get('fix_covers') or [])})"
        if apply_fix
        else ("n/a" if with_fix else "off")
    )
    if with_fix and not apply_fix:
        say(f"reference fix not applied: {found['fix_refusal']}")
    say(f"running the properties on agentscope {row.version} at {row.path} "
        f"(profile {profile}, reference fix {row.fix})")
    started = time.monotonic()
    result = runner.run_suite(
        env.python, log=env.folder / "last-run.log", profile=profile, with_fix=apply_fix,
        counterexamples=counterexamples, workers=workers, say=say,
    )
    row.seconds["suite"] = round(time.monotonic() - started, 1)
    row.verdicts = {code: _relative(v) for code, v in result.verdicts.items()}
    if result.broken is not None:
        say(result.broken)
        return row.could_not_run(Exit.RUN_BROKE, result.broken)
    row.judge()
    say(f"done in {row.seconds['suite']} s")
    return row

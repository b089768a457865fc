"""The gate itself: every SPEC through environment, probe and suite."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from . import environments, reports, runner, specs
from .outcomes import MEANING, Exit, Row, exit_code


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
) -> Exit:
    """Gate every SPEC; print the table; return the exit code."""
    rows: list[Row] = []
    for text in spec_texts or specs.default_specs():
        try:
            targets = specs.resolve(text)
        except specs.NotAgentscope as refused:
            _say(f"[{text}] {refused}")
            rows.append(Row(name=text).could_not_run(Exit.NOT_AGENTSCOPE, str(refused)))
            continue
        for target in targets:
            rows.append(
                _gate_one(target, with_fix=with_fix, profile=profile,
                          counterexamples=counterexamples, workers=workers),
            )
    code = exit_code(rows)
    import reference_fix  # pylint: disable=import-outside-toplevel

    print()
    print(f"hitl-harness gate (profile {profile}; reference fix "
          f"{'applied where it targets the release' if with_fix else 'off'})")
    if with_fix:
        print("reference fixes:\n  " + reference_fix.describe().replace("\n", "\n  "))
    print(reports.table(rows))
    print(f"\nexit {int(code)}: {MEANING[code]}")
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
        env, profile=profile, with_fix=apply_fix, counterexamples=counterexamples,
        workers=workers, say=say,
    )
    row.seconds["suite"] = round(time.monotonic() - started, 1)
    row.verdicts = {code: _relative(v) for code, v in result.verdicts.items()}
    if result.broken is not None:
        say(result.broken)
        return row.could_not_run(Exit.RUN_BROKE, result.broken)
    row.judge()
    say(f"done in {row.seconds['suite']} s")
    return row

"""``hitl-harness merge FILE...``: the saved verdicts of several gates (the
shards of one gate on several CI runners, ``gate --shard i/n --json``) as
one table and one exit code, the same the gate would have ended with.

Each file is read as ``--baseline-json`` reads it; the classifications the
shards made against their baseline and known list are kept as they are. A
baseline every shard ran (or read) is shown once. Files that cannot form
one gate are refused before anything is printed (exit 2): a SPEC gated by
two files, runs with different profiles or reference-fix settings, or a
missing shard of a set (``1/3`` and ``3/3`` without ``2/3``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import compare, inputs, junit, reports
from .outcomes import Exit, Row, exit_code


def merge(paths: list[Path], *, json_path: Path | None = None,
          junit_path: Path | None = None) -> Exit:
    """Print the merged table of ``paths``; write it as JSON and JUnit if
    asked; return the exit code."""
    try:
        settings, rows = _combine(paths, json_path=json_path, junit_path=junit_path)
    except inputs.Refused as refused:
        print(f"hitl-harness merge: error: {refused}", file=sys.stderr)
        return refused.code
    code = exit_code(rows)
    print(reports.render(rows, code, profile=settings.get("profile", "unknown"),
                         with_fix=bool(settings.get("with_fix")), heading="hitl-harness merge",
                         corpus=settings.get("corpus"), patch=settings.get("patch")))
    if json_path is not None:
        reports.write_json(rows, json_path, code, **settings,
                           merged=[str(p) for p in paths])
    if junit_path is not None:
        junit.write_junit(rows, junit_path)
    return code


def _combine(paths: list[Path], *, json_path, junit_path) -> tuple[dict, list[Row]]:
    """The settings the files share and their rows, or :class:`inputs.Refused`."""
    inputs.check_output_file("--json", json_path)
    inputs.check_output_file("--junit", junit_path)
    runs = []
    for path in paths:
        try:
            runs.append((path, *compare.load_run(path)))
        except compare.BadBaseline as bad:
            raise inputs.Refused(str(bad)) from None
    settings: dict = {}
    for key in ("profile", "with_fix", "corpus"):
        said = {run[1][key] for run in runs if key in run[1]}
        if len(said) > 1:
            raise inputs.Refused(f"the files ran with different {key.replace('_', '-')} "
                                 f"settings ({', '.join(map(str, sorted(said, key=str)))})")
        if said:
            settings[key] = said.pop()
    layers = {json.dumps(run[1].get("patch") or {}, sort_keys=True) for run in runs}
    if len(layers) > 1:
        raise inputs.Refused(f"the files ran with different --patch layers ({', '.join(sorted(layers))})")
    layer = json.loads(layers.pop()) if layers else {}
    if layer:
        settings["patch"] = layer
    _check_shards([(path, run.get("shard")) for path, run, _ in runs])
    baselines: list[Row] = []
    candidates: dict[str, tuple[Path, Row]] = {}
    for path, _, rows in runs:
        for row in rows:
            if row.role == "baseline":
                if not any((b.name, b.version) == (row.name, row.version) for b in baselines):
                    baselines.append(row)
            elif row.name in candidates:
                raise inputs.Refused(f"{row.name} is gated in both {candidates[row.name][0]} "
                                     f"and {path}")
            else:
                candidates[row.name] = (path, row)
    return settings, baselines + [row for _, row in candidates.values()]


def _check_shards(shards: list[tuple[Path, str | None]]) -> None:
    """Every shard of each set of shards is there, once."""
    counts: dict[int, dict[int, Path]] = {}
    for path, shard in shards:
        if shard is None:
            continue
        index, count = (int(n) for n in shard.split("/"))
        seen = counts.setdefault(count, {})
        if index in seen:
            raise inputs.Refused(f"shard {shard} is in both {seen[index]} and {path}")
        seen[index] = path
    for count, seen in counts.items():
        missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in seen]
        if missing:
            raise inputs.Refused(f"shard{'s' if len(missing) > 1 else ''} "
                                 f"{', '.join(missing)} missing: a merge of some shards "
                                 "would hide what the others found")

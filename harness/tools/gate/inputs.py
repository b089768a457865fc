"""Every input of a gate checked before any work starts.

The output paths, the saved baseline, the known list and the form of every
SPEC are checked first (no network, no files written); then every SPEC is
resolved against the package index. A mistake ends the gate within seconds,
with one line (:class:`Refused`) and its exit code: 2 for a usage mistake
(a path, a file, text that is no SPEC), 3 for a SPEC that names no
agentscope.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..writable import folder_problem
from . import compare, known, specs
from .outcomes import Exit, Row
from .shards import Shard


class Refused(Exception):
    """An input the gate cannot start with: one line and an exit code."""

    def __init__(self, message: str, code: Exit = Exit.USAGE):
        super().__init__(message)
        self.code = code


@dataclass
class Plan:
    """What a gate will do, every input checked."""

    candidates: list[specs.Target]
    baseline: specs.Target | None = None  # to run
    baseline_row: Row | None = None  # read from saved verdicts
    known: list[known.Known] = field(default_factory=list)


def _writable_folder(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def check_output_file(option: str, path: Path | None) -> None:
    """``path`` can be written: its folder exists and is writable."""
    if path is None:
        return
    if path.is_dir():
        raise Refused(f"{option} {path}: is a folder, not a file")
    if not path.parent.is_dir():
        raise Refused(f"{option} {path}: no such folder {path.parent}")
    if not _writable_folder(path.parent) or (path.exists() and not os.access(path, os.W_OK)):
        raise Refused(f"{option} {path}: cannot write there")


def check_output_folder(option: str, path: Path) -> None:
    """``path`` is, or can be made, a writable folder (tried, leaving
    nothing behind)."""
    problem = folder_problem(path)
    if problem is not None:
        raise Refused(f"{option} {path}: {problem}")


def prepare(
    spec_texts: list[str],
    *,
    baseline: str | None = None,
    baseline_json: Path | None = None,
    known_path: Path | None = None,
    json_path: Path | None = None,
    junit_path: Path | None = None,
    counterexamples: Path = Path("counterexamples"),
    shard: Shard | None = None,
) -> Plan:
    """The plan of a gate, or :class:`Refused`. With ``shard``, the
    candidates are that shard's share of every SPEC's releases."""
    check_output_file("--json", json_path)
    check_output_file("--junit", junit_path)
    check_output_folder("--counterexamples", counterexamples)
    plan = Plan(candidates=[])
    try:
        if known_path is not None:
            plan.known = known.load(known_path)
    except known.BadList as bad:
        raise Refused(f"--known {bad}") from None
    try:
        if baseline_json is not None:
            rows = compare.load_rows(baseline_json)
            plan.baseline_row = compare.pick_baseline(rows, baseline_json, baseline)
    except compare.BadBaseline as bad:
        raise Refused(f"--baseline-json {bad}") from None
    texts = spec_texts or specs.default_specs()
    to_run = baseline if baseline is not None and baseline_json is None else None
    try:
        for text in [*texts, *([to_run] if to_run else [])]:
            specs.check_form(text)
        plan.candidates = specs.resolve_all(texts)
        if shard is not None:
            plan.candidates = shard.share(plan.candidates)
        if to_run is not None:
            found = specs.resolve(to_run)
            if len(found) != 1:
                raise Refused(f"--baseline {to_run}: names {len(found)} releases "
                              f"({', '.join(t.version for t in found)}); name one")
            plan.baseline = found[0] if plan.candidates else None  # an empty shard
    except specs.BadSpec as bad:
        raise Refused(str(bad)) from None
    except specs.NotAgentscope as missing:
        raise Refused(str(missing), Exit.NOT_AGENTSCOPE) from None
    return plan

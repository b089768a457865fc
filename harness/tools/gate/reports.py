"""The gate's verdicts as text (the table of :mod:`.table`, each
candidate's comparison with the baseline and the known violations, the exit
code in words) and as JSON (JUnit XML: :mod:`.junit`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from properties.story.environment import where_agentscope_came_from

from . import pregate
from .compare import HOLDS, NEW, ORDER
from .outcomes import JSON_SCHEMA, MEANING, Exit, Row, code_order
from .table import table, wrap


def render(rows: list[Row], code: Exit, *, profile: str, with_fix: bool,
           heading: str = "hitl-harness gate", corpus: Path | str | None = None,
           patch: dict | None = None) -> str:
    """Everything the gate prints after its work: how it ran (with the
    user's ``patch`` layer, if any), the table, the pre-gate (the replays of
    the counterexamples in ``corpus``), the comparison, and the exit code
    in words."""
    import reference_fix  # pylint: disable=import-outside-toplevel

    fix = "applied where it targets the release" if with_fix else "off"
    lines = [f"{heading} (profile {profile}; reference fix {fix})"]
    if patch:
        lines.append(f"patch layer: {patch['name']} ({patch['digest']}), installed over agentscope")
    if with_fix:
        lines += ["reference fixes:"] + [
            wrap("  " + line, "      ") for line in reference_fix.describe().splitlines()
        ]
    lines.append(table(rows))
    replayed = pregate.render(rows, corpus)
    if replayed:
        lines += ["", replayed]
    compared = comparison(rows)
    if compared:
        lines += ["", compared]
    lines += ["", wrap(f"exit {int(code)}: {meaning(rows, code)}")]
    return "\n".join(lines)


#: How a property another search found on the way is described.
_ON_THE_WAY = {
    "new": "newly found on the way by",
    "still": "still found on the way by",
    "found": "found on the way by",
    "gone": "no longer found on the way",
}


def comparison(rows: list[Row]) -> str:
    """Per candidate, its properties by classification (those that hold
    and were found by no search left out): each with what other searches
    found on the way, and the findings it is known as."""
    lines = []
    for row in rows:
        compared = row.baseline is not None or any(
            e.get("known") for e in row.comparison.values()
        )
        if row.role != "candidate" or not compared:
            continue
        against = f"against the baseline {row.baseline}" if row.baseline else "(no baseline)"
        lines.append(f"{row.name} {against}:")
        groups: dict[str, list[str]] = {}
        for code, entry in row.comparison.items():
            kind = entry["classification"]
            if kind == HOLDS and entry.get("on_the_way"):
                kind = "on the way"
            groups.setdefault(kind, []).append(_named(code, entry))
        for kind in (*ORDER[:-1], "on the way"):
            if kind in groups:
                label = kind.upper() if kind == NEW else kind
                lines.append(wrap(f"  {label:<15} {', '.join(groups[kind])}", " " * 18))
        verdict = (f"fails the gate: {', '.join(row.new)}" if row.new
                   else "nothing new is violated")
        lines.append(wrap(f"  -> {verdict}"))
    return "\n".join(lines)


def _named(code: str, entry: dict) -> str:
    """``I1 [still found on the way by I8; known F2]``."""
    notes = []
    way = entry.get("on_the_way")
    if way == "gone":
        notes.append(_ON_THE_WAY[way])
    elif way:
        others = [s for s in entry.get("found_by", []) if s != code]
        notes.append(f"{_ON_THE_WAY[way]} {', '.join(others)}")
    if entry.get("known"):
        notes.append("known " + ", ".join(entry["known"]))
    return code + (f" [{'; '.join(notes)}]" if notes else "")


def meaning(rows: list[Row], code: Exit) -> str:
    """The exit code in words, saying when violations did not fail."""
    shown = [r for r in rows if r.role == "candidate" and r.outcome == Exit.VIOLATED]
    if code == Exit.HOLDS and shown:
        return "nothing new is VIOLATED (the violations shown are known or were on the baseline)"
    if code == Exit.VIOLATED and any(r.baseline for r in shown):
        return "a property is newly VIOLATED"
    return MEANING[code]


def under_cwd(path: str | None) -> str | None:
    """``path`` relative to the working directory when it lies under it
    (what a person and a CI artifact see), else as it is."""
    if path and Path(path).is_relative_to(Path.cwd()):
        return str(Path(path).relative_to(Path.cwd()))
    return path


def write_json(rows: list[Row], path: Path, exit_code: Exit, **run) -> None:
    """The same verdicts, machine-readable (:data:`.outcomes.JSON_SCHEMA`): per
    SPEC, per property its verdict, the seconds its search took, its
    classification (:mod:`.compare`; none on the baseline), its
    counterexample folder, and what was expected and what happened. ``run``
    says how the gate ran (``profile``, ``with_fix``, ``shard``, the
    pre-gate's ``corpus``, and ``patch``: the user's patch layer's name and
    digest, only when one was installed); each SPEC's ``pregate`` lists what replaying
    each committed counterexample found."""
    path.write_text(
        json.dumps(
            {
                "schema": JSON_SCHEMA,
                "exit_code": int(exit_code),
                "exit_meaning": exit_code.name.lower(),
                **run,
                "specs": [_spec(row) for row in rows],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def _spec(row: Row) -> dict:
    """One SPEC's entry: the row, each verdict with its classification;
    where agentscope came from as words (a checkout's path is its SPEC's
    name), and each replayed folder relative to the working directory when
    under it, so that a committed file carries no path of this machine."""
    entry = {**asdict(row), "outcome": row.outcome.name.lower()}
    if row.path:
        entry["path"] = where_agentscope_came_from(row.path)
    entry["pregate"] = [{**e, "path": under_cwd(e["path"])} if e.get("path") else e
                        for e in entry.get("pregate") or []]
    entry["verdicts"] = {
        code: {**verdict, "classification": row.comparison.get(code, {}).get("classification")}
        for code, verdict in sorted(row.verdicts.items(), key=lambda kv: code_order(kv[0]))
    }
    return entry

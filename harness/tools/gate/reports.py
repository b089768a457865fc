"""The gate's verdicts as a table (with each candidate's comparison with
the baseline and the known violations), as JSON and as JUnit XML."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

from .compare import HOLDS, NEW, ORDER
from .outcomes import COULD_NOT_RUN, MEANING, NOT_APPLICABLE, Exit, Row, code_order, violated


def table(rows: list[Row]) -> str:
    """SPEC × property: holds / VIOLATED / could not run (and why)."""
    codes = sorted({code for row in rows for code in row.verdicts}, key=code_order)
    head = ["SPEC", "agentscope", "fix", *codes]
    body = []
    for row in rows:
        name = f"{row.name} (baseline)" if row.role == "baseline" else row.name
        if row.outcome in COULD_NOT_RUN:
            body.append([name, row.version or "-", row.fix,
                         f"could not run ({COULD_NOT_RUN[row.outcome]})"])
            continue
        cells = [_cell(row.verdicts.get(c, {})) for c in codes]
        body.append([name, row.version or "-", row.fix, *cells])
    # A could-not-run row's last cell spans the property columns: it does
    # not widen them.
    sized = [cells if len(cells) == len(head) else cells[:-1] for cells in [head, *body]]
    widths = [
        max(len(str(cells[i])) for cells in sized if i < len(cells))
        for i in range(len(head))
    ]

    def render(cells: list) -> str:
        padded = [str(c).ljust(w) for c, w in zip(cells[:-1], widths)]
        return "  ".join([*padded, str(cells[-1])]).rstrip()

    lines = [render(cells) for cells in [head, *body]]
    notes = []
    for row, name in zip(rows, (cells[0] for cells in body)):
        if row.outcome in COULD_NOT_RUN:
            notes.append(f"{name}: could not run: {row.reason}")
        for code, verdict in sorted(row.verdicts.items(), key=lambda kv: code_order(kv[0])):
            if verdict["verdict"] == NOT_APPLICABLE:
                notes.append(f"{name}: {code} not applicable: {verdict.get('why', '?')}")
            elif violated(verdict):
                where = verdict.get("counterexample") or "no counterexample written"
                notes.append(f"{name}: {code} {verdict['verdict']} -> {where}")
            for part in verdict.get("left_out") or []:
                notes.append(f"{name}: {code} leaves out {part}")
            for other, where in (verdict.get("also_found") or {}).items():
                notes.append(f"{name}: {code}'s search also found {other} -> {where}")
            unreached = [w for w, n in (verdict.get("windows") or {}).items() if not n]
            if verdict["verdict"] == "holds" and unreached:
                notes.append(f"{name}: {code} holds, unreached: {', '.join(unreached)}")
    return "\n".join(lines + ([""] + notes if notes else []))


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
                lines.append(f"  {label:<15} {', '.join(groups[kind])}")
        verdict = (f"fails the gate: {', '.join(row.new)}" if row.new
                   else "nothing new is violated")
        lines.append(f"  -> {verdict}")
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


def _cell(verdict: dict) -> str:
    """A verdict, and what else its search found (``holds+I3``)."""
    also = verdict.get("also_found") or {}
    text = verdict.get("verdict", "-")
    text = "n/a" if text == NOT_APPLICABLE else text + ("*" if verdict.get("left_out") else "")
    return text + "".join(f"+{code}" for code in also)


def write_json(rows: list[Row], path: Path, exit_code: Exit) -> None:
    """The same verdicts, machine-readable."""
    path.write_text(
        json.dumps(
            {
                "exit_code": int(exit_code),
                "exit_meaning": exit_code.name.lower(),
                "specs": [
                    {**asdict(row), "outcome": row.outcome.name.lower()} for row in rows
                ],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def write_junit(rows: list[Row], path: Path) -> None:
    """One test suite per SPEC, one test case per property."""
    suites = ET.Element("testsuites", name="hitl-harness gate")
    for row in rows:
        label = f"agentscope {row.name}" + (" (baseline)" if row.role == "baseline" else "")
        suite = ET.SubElement(suites, "testsuite", name=label)
        cases = 0
        failures = errors = 0
        if row.outcome in COULD_NOT_RUN:
            case = ET.SubElement(suite, "testcase", classname=label,
                                 name="could run")
            ET.SubElement(case, "error", message=f"{COULD_NOT_RUN[row.outcome]}: {row.reason}",
                          type=row.outcome.name.lower())
            cases, errors = 1, 1
        for code, verdict in sorted(row.verdicts.items()):
            cases += 1
            case = ET.SubElement(
                suite, "testcase", classname=label,
                name=f"{code} {verdict.get('title', '')}".strip(),
                time=f"{row.seconds.get('suite', 0.0):.1f}",
            )
            entry = row.comparison.get(code, {})
            if verdict["verdict"] == NOT_APPLICABLE:
                ET.SubElement(case, "skipped", message=f"{code} not applicable: {verdict.get('why', '?')}")
            elif violated(verdict) and row.role == "baseline":
                ET.SubElement(case, "skipped", message=f"{code} {verdict['verdict']} on the baseline")
            elif violated(verdict) and entry and not entry.get("fails"):
                known = f", known {', '.join(entry['known'])}" if entry.get("known") else ""
                ET.SubElement(case, "skipped",
                              message=f"{code} {entry['classification']}{known}")
            elif violated(verdict):
                failures += 1
                where = verdict.get("counterexample") or "no counterexample written"
                failure = ET.SubElement(case, "failure", message=f"{code} {verdict['verdict']}",
                                        type="InvariantViolated")
                failure.text = f"counterexample: {where}"
        for code in row.new or []:  # failing only through what other searches found
            if violated(row.verdicts.get(code, {"verdict": "holds"})):
                continue
            cases, failures = cases + 1, failures + 1
            searches = [s for s in row.comparison[code]["not_known"] if s != code]
            case = ET.SubElement(suite, "testcase", classname=label,
                                 name=f"{code} found on the way")
            failure = ET.SubElement(
                case, "failure", type="InvariantViolated",
                message=f"{code} newly found on the way by {', '.join(searches)}",
            )
            failure.text = "\n".join(
                f"{s}'s search: {row.verdicts[s]['also_found'][code]}"
                for s in searches if code in (row.verdicts.get(s, {}).get("also_found") or {})
            )
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(len(suite.findall("testcase/skipped"))))
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)

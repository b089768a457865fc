"""The gate's verdicts as a table, as JSON and as JUnit XML."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

from properties.catalog import code_order

from .outcomes import COULD_NOT_RUN, Exit, Row


def table(rows: list[Row]) -> str:
    """SPEC × property: holds / VIOLATED / could not run (and why)."""
    codes = sorted({code for row in rows for code in row.verdicts}, key=code_order)
    head = ["SPEC", "agentscope", "fix", *codes]
    body = []
    for row in rows:
        if row.outcome in COULD_NOT_RUN:
            body.append([row.name, row.version or "-", row.fix,
                         f"could not run ({COULD_NOT_RUN[row.outcome]})"])
            continue
        cells = [_cell(row.verdicts.get(c, {})) for c in codes]
        body.append([row.name, row.version or "-", row.fix, *cells])
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
    for row in rows:
        if row.outcome in COULD_NOT_RUN:
            notes.append(f"{row.name}: could not run: {row.reason}")
        for code, verdict in sorted(row.verdicts.items(), key=lambda kv: code_order(kv[0])):
            if verdict["verdict"] != "holds":
                where = verdict.get("counterexample") or "no counterexample written"
                notes.append(f"{row.name}: {code} {verdict['verdict']} -> {where}")
            for other, where in (verdict.get("also_found") or {}).items():
                notes.append(f"{row.name}: {code}'s search also found {other} -> {where}")
    return "\n".join(lines + ([""] + notes if notes else []))


def _cell(verdict: dict) -> str:
    """A verdict, and what else its search found (``holds+I3``)."""
    also = verdict.get("also_found") or {}
    text = verdict.get("verdict", "-")
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
        suite = ET.SubElement(suites, "testsuite", name=f"agentscope {row.name}")
        cases = 0
        failures = errors = 0
        if row.outcome in COULD_NOT_RUN:
            case = ET.SubElement(suite, "testcase", classname=f"agentscope {row.name}",
                                 name="could run")
            ET.SubElement(case, "error", message=f"{COULD_NOT_RUN[row.outcome]}: {row.reason}",
                          type=row.outcome.name.lower())
            cases, errors = 1, 1
        for code, verdict in sorted(row.verdicts.items()):
            cases += 1
            case = ET.SubElement(
                suite, "testcase", classname=f"agentscope {row.name}",
                name=f"{code} {verdict.get('title', '')}".strip(),
                time=f"{row.seconds.get('suite', 0.0):.1f}",
            )
            if verdict["verdict"] != "holds":
                failures += 1
                where = verdict.get("counterexample") or "no counterexample written"
                failure = ET.SubElement(case, "failure", message=f"{code} {verdict['verdict']}",
                                        type="InvariantViolated")
                failure.text = f"counterexample: {where}"
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)

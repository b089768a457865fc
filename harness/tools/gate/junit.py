"""The gate's verdicts as JUnit XML: one test suite per SPEC, one test case
per property in catalog order (I1, I2, …, I10), each with the time its
search took, and a failure that says what was expected, what happened and
where the counterexample folder is."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .outcomes import COULD_NOT_RUN, NOT_APPLICABLE, Exit, Row, code_order, violated


def write_junit(rows: list[Row], path: Path) -> None:
    """One test suite per SPEC, one test case per property."""
    suites = ET.Element("testsuites", name="hitl-harness gate")
    for row in rows:
        _suite(suites, row)
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _suite(suites: ET.Element, row: Row) -> None:
    label = f"agentscope {row.name}" + (" (baseline)" if row.role == "baseline" else "")
    suite = ET.SubElement(suites, "testsuite", name=label)
    if "suite" in row.seconds:
        suite.set("time", f"{row.seconds['suite']:.1f}")
    if row.outcome in COULD_NOT_RUN:
        ran = "finished within its budget" if row.outcome == Exit.DID_NOT_FINISH else "could run"
        case = ET.SubElement(suite, "testcase", classname=label, name=ran)
        ET.SubElement(case, "error", message=f"{COULD_NOT_RUN[row.outcome]}: {row.reason}",
                      type=row.outcome.name.lower())
    for code in sorted(row.verdicts, key=code_order):
        _case(suite, label, row, code)
    for code in sorted(row.new or [], key=code_order):  # failing only through other searches
        if not violated(row.verdicts.get(code, {"verdict": "holds"})):
            _found_on_the_way(suite, label, row, code)
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(len(suite.findall("testcase/failure"))))
    suite.set("errors", str(len(suite.findall("testcase/error"))))
    suite.set("skipped", str(len(suite.findall("testcase/skipped"))))


def _case(suite: ET.Element, label: str, row: Row, code: str) -> None:
    verdict = row.verdicts[code]
    case = ET.SubElement(suite, "testcase", classname=label,
                         name=f"{code} {verdict.get('title', '')}".strip())
    if verdict.get("seconds") is not None:
        case.set("time", f"{verdict['seconds']:.2f}")
    if verdict["verdict"] == "holds":
        return
    if verdict["verdict"] == NOT_APPLICABLE:
        ET.SubElement(case, "skipped", message=f"{code} not applicable: {verdict.get('why', '?')}")
        return
    entry = row.comparison.get(code, {})
    body = _body(verdict, verdict.get("counterexample"))
    if row.role == "baseline":
        skipped = ET.SubElement(case, "skipped", message=f"{code} {verdict['verdict']} on the baseline")
        skipped.text = body
    elif entry and not entry.get("fails"):
        known = f", known {', '.join(entry['known'])}" if entry.get("known") else ""
        skipped = ET.SubElement(case, "skipped", message=f"{code} {entry['classification']}{known}")
        skipped.text = body
    else:
        kind = entry.get("classification", verdict["verdict"])
        failure = ET.SubElement(case, "failure", type="InvariantViolated",
                                message=_message(code, kind.upper(), verdict))
        failure.text = body


def _found_on_the_way(suite: ET.Element, label: str, row: Row, code: str) -> None:
    """A property whose own search held, failing through what other
    searches found on the way."""
    searches = [s for s in row.comparison[code]["not_known"] if s != code]
    case = ET.SubElement(suite, "testcase", classname=label, name=f"{code} found on the way")
    first = row.verdicts[searches[0]] if searches else {}
    says = (first.get("also_found_says") or {}).get(code, {})
    failure = ET.SubElement(
        case, "failure", type="InvariantViolated",
        message=_message(code, f"newly found on the way by {', '.join(searches)}", says),
    )
    failure.text = "\n\n".join(
        f"{s}'s search:\n"
        + _body((row.verdicts[s].get("also_found_says") or {}).get(code, {}),
                row.verdicts[s]["also_found"][code])
        for s in searches if code in (row.verdicts.get(s, {}).get("also_found") or {})
    )


def _message(code: str, what: str, says: dict) -> str:
    """``I1 NEW: expected ...; actual ...`` (one line)."""
    parts = [f"expected {says['expected']}"] if says.get("expected") else []
    parts += [f"actual {says['actual']}"] if says.get("actual") else []
    return " ".join(f"{code} {what}: {'; '.join(parts)}".split()) if parts else f"{code} {what}"


def _body(says: dict, folder: str | None) -> str:
    """What was expected and happened, the folder and how to replay it."""
    lines = []
    if says.get("expected"):
        lines.append(f"expected: {says['expected']}")
    if says.get("actual"):
        lines.append(f"actual:   {says['actual']}")
    if folder:
        lines += [f"counterexample: {folder}", f"replay: hitl-harness replay {folder}"]
    else:
        lines.append("counterexample: none written")
    return "\n".join(lines)

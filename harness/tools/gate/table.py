"""The gate's table: SPEC × property, one mark each, a legend, and
under it the notes (each violation's folder, each SPEC that could not run
or did not finish, each hollow "holds"), every line within :data:`WIDTH` columns."""
from __future__ import annotations

import textwrap

from .compare import violations
from .outcomes import COULD_NOT_RUN, NOT_APPLICABLE, Row, code_order

#: The widest line the gate prints (a path longer than that is not broken).
WIDTH = 100

#: The widest SPEC cell; a longer one keeps its end (``…/src/agentscope``).
SPEC_WIDTH = 22

HOLDS, FAILS, SHOWN, BROKE, ALSO, NA = ".", "X", "x", "!", "+", "n/a"

LEGEND = (
    f"legend: {HOLDS} holds   {FAILS} VIOLATED, fails the gate   "
    f"{SHOWN} VIOLATED, known or on the baseline too\n"
    f"        {BROKE} its search broke (crash, error)   "
    f"{ALSO} its search also found other violations (below)\n"
    f"        {NA} not applicable: the release lacks what it is about (below: why)"
)


def wrap(line: str, indent: str = "    ") -> str:
    """``line`` within :data:`WIDTH` columns, its continuation indented."""
    if len(line) <= WIDTH:
        return line
    return textwrap.fill(line, WIDTH, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def spec_cell(row: Row) -> str:
    """The row's name (with the agentscope version a checkout turned out to
    be, and the baseline said), at most :data:`SPEC_WIDTH` wide."""
    name = row.name
    if row.version and row.version not in name:
        name = f"{name} ({row.version})"
    if row.role == "baseline":
        name += " (baseline)"
    return name if len(name) <= SPEC_WIDTH else "…" + name[-(SPEC_WIDTH - 1):]


def mark(row: Row, code: str, violated: dict[str, list[str]]) -> str:
    """A property on one SPEC as a mark (see :data:`LEGEND`): violated
    (by its own search or another's, ``violated``: :func:`.compare.violations`)
    or not, and whether its own search found other violations."""
    verdict = row.verdicts.get(code) or {}
    if code in violated:
        failing = row.role != "baseline" and (row.new is None or code in row.new)
        text = FAILS if failing else SHOWN
    elif verdict.get("verdict") == "holds":
        text = HOLDS
    elif verdict.get("verdict") == NOT_APPLICABLE:
        text = NA
    else:
        text = BROKE if verdict else "-"
    return text + (ALSO if verdict.get("also_found") else "")


def table(rows: list[Row]) -> str:
    """SPEC × property marks, the legend, then the notes."""
    violated = [violations(row) for row in rows]
    codes = sorted({code for row, found in zip(rows, violated) for code in [*row.verdicts, *found]},
                   key=code_order)
    head = ["SPEC", "fix", *codes]
    body = []
    for row, found in zip(rows, violated):
        fix = row.fix.split(" ", 1)[0]  # "on (I1,I2)": what it covers is in the header
        if row.outcome in COULD_NOT_RUN:
            body.append([spec_cell(row), fix, row.headline])
        else:
            body.append([spec_cell(row), fix, *(mark(row, c, found) for c in codes)])
    widths = [max(len(cells[i]) for cells in [head, *body] if len(cells) == len(head)
                  or i < len(cells) - 1) for i in range(len(head))]

    def render(cells: list[str]) -> str:
        named = [cells[0].ljust(widths[0]), cells[1].ljust(widths[1])]
        spans = len(cells) != len(head)  # "could not run (...)", "did not finish" span the marks
        marks = [c if spans else c.ljust(widths[i]) for i, c in enumerate(cells[2:], 2)]
        return ("  ".join(named) + "  " + " ".join(marks)).rstrip()

    lines = [render(cells) for cells in [head, *body]]
    return "\n".join([*lines, "", LEGEND, *_notes(rows)])


def _notes(rows: list[Row]) -> list[str]:
    notes = []
    for row in rows:
        name = spec_cell(row)
        if row.outcome in COULD_NOT_RUN:
            notes.append(f"{name}: {row.kind}: {row.reason}")
        for code in sorted(row.verdicts, key=code_order):
            verdict = row.verdicts[code]
            if verdict["verdict"] == NOT_APPLICABLE:
                notes.append(f"{name}: {code} not applicable: {verdict.get('why', '?')}")
            elif verdict["verdict"] != "holds":
                where = verdict.get("counterexample") or "no counterexample written"
                notes.append(f"{name}: {code} {verdict['verdict']} -> {where}")
            for part in verdict.get("left_out") or []:
                notes.append(f"{name}: {code} leaves out {part}")
            for other, where in (verdict.get("also_found") or {}).items():
                notes.append(f"{name}: {code}'s search also found {other} -> {where}")
            unreached = [w for w, n in (verdict.get("windows") or {}).items() if not n]
            if verdict["verdict"] == "holds" and unreached:
                notes.append(f"{name}: {code} holds, unreached: {', '.join(unreached)}")
    return ["", *(wrap(note) for note in notes)] if notes else []

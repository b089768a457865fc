"""Each candidate's properties against a baseline and the known violations.

Each property is classified by its own search's verdict; against a
baseline it is

- *new*: violated now, held on the baseline;
- *fixed*: holds now, violated on the baseline;
- *still violated*: violated on both;
- *holds*: holds on both;
- *not applicable*: the candidate lacks what the property is about;

and, with no baseline (or none for that property), *violated* or *holds*.
A property another property's search found on the way (``also_found``) is
told apart (``on_the_way``): *new* when no search found it on the baseline,
*still* when one did, *gone* when only the baseline's searches found it,
*found* with no baseline. A violation is *known* when an entry of the known
list covers the search that found it. A new (or uncompared) violation, by
its own search or on the way, that is not known fails the gate.
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from harness.world.deployment import Deployment

from . import known as known_list
from .outcomes import JSON_READABLE, NOT_APPLICABLE, Exit, Row, code_order, violated

NEW, FIXED, STILL, HOLDS, VIOLATED = "new", "fixed", "still violated", "holds", "violated"

#: The classifications in the order a report lists them.
ORDER = (NEW, VIOLATED, STILL, FIXED, NOT_APPLICABLE, HOLDS)


class BadBaseline(Exception):
    """The saved verdicts cannot serve as a baseline (one line)."""


def violations(row: Row) -> dict[str, list[str]]:
    """Each violated property, and the searches that found it (a property's
    own search is its own code), in catalog order."""
    found: dict[str, list[str]] = {}
    for search in sorted(row.verdicts, key=code_order):
        verdict = row.verdicts[search]
        if violated(verdict):
            found.setdefault(search, []).append(search)
        for code in verdict.get("also_found") or {}:
            found.setdefault(code, []).append(search)
    return dict(sorted(found.items(), key=lambda item: code_order(item[0])))


def classify(row: Row, baseline: Row | None, known: list[known_list.Known],
             deployment: Deployment = Deployment()) -> None:
    """Set ``row.comparison`` and ``row.new`` (the failing properties),
    the known list read for the ``deployment`` the gate searched on."""
    now = violations(row)
    usable = baseline is not None and bool(baseline.verdicts)
    before = violations(baseline) if usable else {}
    row.baseline = baseline.name if usable else None
    row.comparison, row.new = {}, []
    for code in sorted(set(row.verdicts) | set(now) | set(before), key=code_order):
        own_before = code in before.get(code, [])
        if code in now.get(code, []):
            compared = usable and code in baseline.verdicts
            kind = (STILL if own_before else NEW) if compared else VIOLATED
        elif row.verdicts.get(code, {}).get("verdict") == NOT_APPLICABLE:
            kind = NOT_APPLICABLE
        else:
            kind = FIXED if own_before and code in row.verdicts else HOLDS
        entry: dict = {"classification": kind}
        others = [s for s in now.get(code, []) if s != code]
        if others:
            entry["on_the_way"] = ("still" if code in before else "new") if usable else "found"
        elif code not in now and any(s != code for s in before.get(code, [])):
            entry["on_the_way"] = "gone"
        if code in now:
            names, uncovered = known_list.findings(known, code, now[code], row.version, deployment)
            entry.update(found_by=now[code], known=names, not_known=uncovered)
            own_fails = kind in (NEW, VIOLATED) and code in uncovered
            way_fails = entry["on_the_way"] in ("new", "found") if others else False
            entry["fails"] = own_fails or (way_fails and any(s in uncovered for s in others))
            if entry["fails"]:
                row.new.append(code)
        row.comparison[code] = entry


def load_rows(path: Path) -> list[Row]:
    """The rows a gate saved with ``--json``."""
    return load_run(path)[1]


def load_run(path: Path) -> tuple[dict, list[Row]]:
    """How a gate saved with ``--json`` ran (``profile``, ``with_fix``,
    ``shard``, the pre-gate's ``corpus``, the ``patch`` layer when one was
    installed: empty for a version 1 file), and
    its rows."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        saved = data["specs"]
        version = data.get("schema", 1)
    except OSError as failed:
        raise BadBaseline(f"{path}: {failed.strerror or failed}") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise BadBaseline(f"{path}: not the JSON of a gate (--json)") from None
    if version not in JSON_READABLE:
        raise BadBaseline(f"{path}: gate JSON version {version}; this harness reads "
                          f"{', '.join(map(str, JSON_READABLE))} (upgrade the harness)")
    known_fields = {f.name for f in fields(Row)}
    rows = []
    for entry in saved:
        try:
            outcome = Exit[str(entry.get("outcome", "")).upper()]
            values = {k: v for k, v in entry.items() if k in known_fields and k != "outcome"}
            rows.append(Row(**values, outcome=outcome))
        except (KeyError, TypeError, AttributeError):
            raise BadBaseline(f"{path}: not the JSON of a gate (--json)") from None
    return {k: data[k] for k in ("profile", "with_fix", "shard", "corpus", "patch") if k in data}, rows


def pick_baseline(rows: list[Row], path: Path, name: str | None) -> Row:
    """The row of ``rows`` that is the baseline: the only one, or the one
    named ``name`` (as a row name or an agentscope version)."""
    if name is not None:
        wanted = name[1:] if name[:1] in "vV" and name[1:2].isdigit() else name
        chosen = [r for r in rows if wanted in (r.name, r.version)]
        if not chosen:
            raise BadBaseline(f"{path} has no verdicts of {name} (it has: "
                              f"{', '.join(r.name for r in rows) or 'none'})")
    elif len(rows) != 1:
        raise BadBaseline(f"{path} holds {len(rows)} SPECs ("
                          f"{', '.join(r.name for r in rows)}): name one with --baseline")
    else:
        chosen = rows
    row = chosen[-1]
    if not row.verdicts:
        raise BadBaseline(f"{path}: {row.name} {row.kind} there ({row.reason}), "
                          "so it has no verdicts to compare with")
    row.role, row.new = "baseline", []
    return row

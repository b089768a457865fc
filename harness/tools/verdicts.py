"""The property suite's verdicts as the pytest plugin reports them: what a
failing test's story expected and what happened, the summary's lines, and
the JSON ``--hitl-verdicts-json`` writes (what ``hitl-harness gate`` reads)."""
from __future__ import annotations

import json
from pathlib import Path

from harness.world import agentscope_under_test
from properties.story.environment import where_agentscope_came_from


#: The verdict of a property about a feature the installed agentscope lacks
#: (its record's ``needs``): not run, and neither holding nor violated.
NOT_APPLICABLE = "not applicable"

#: The verdict of a property test that failed with no story of any
#: property: the search itself broke, so nothing was learnt of agentscope.
ERROR = "ERROR"


def entry(report, code: str, slug: str, seconds: float) -> dict:
    """A property test's report as its verdict entry: the verdict (holds,
    VIOLATED, ERROR, crash, not applicable...), its counterexample folder,
    what was expected and happened, what its search found on the way, the
    windows it reached, the orders of hand-off operations its stories
    played (:mod:`properties.reach`), and why it (or a part of it) is not
    applicable."""
    said = report.user_properties
    verdict = {"passed": "holds", "failed": "VIOLATED"}.get(report.outcome, report.outcome)
    found = [v for k, v in said if k == "found"]
    why = next((v for k, v in said if k == "not_applicable"), None)
    if report.outcome == "failed" and (report.when != "call" or not found):
        # No story failed: a health check, the shrinker, a teardown or
        # the harness itself broke. Never a violation, never a finding.
        verdict = ERROR
    elif report.outcome == "skipped" and why is not None:
        verdict = NOT_APPLICABLE
    if found and code not in found and verdict not in (ERROR, NOT_APPLICABLE):
        verdict = "crash"  # a step raised what no rule injected
    folders = [v for k, v in said if k == "counterexample"]
    expected, actual = says(report) if report.outcome == "failed" else (None, None)
    result = {
        "title": slug,
        "verdict": verdict,
        "seconds": seconds,
        "counterexample": folders[0] if folders else None,
        "expected": expected,
        "actual": actual,
        "also_found": dict(v for k, v in said if k == "found_on_the_way"),
        "also_found_says": {
            other: {"expected": e, "actual": a}
            for other, (e, a) in (v for k, v in said if k == "found_on_the_way_says")
        },
        "findings": dict(v for k, v in said if k == "named" and v[1] is not None),
        "windows": next((v for k, v in said if k == "windows"), {}),
        "pairs": next((v for k, v in said if k == "pairs"), {}),
    }
    left_out = [v for k, v in said if k == "left_out"]
    missing = next((v for k, v in said if k == "windows_not_applicable"), None)
    pairs_missing = next((v for k, v in said if k == "pairs_not_applicable"), None)
    extra = {"why": why, "left_out": left_out, "windows_not_applicable": missing,
             "pairs_not_applicable": pairs_missing}
    result.update({k: v for k, v in extra.items() if v})
    return result


def says(report) -> tuple[str | None, str | None]:
    """What the failing story expected and what happened; for a failure
    with no story, only what happened (pytest's one-line reason)."""
    said = [v for k, v in report.user_properties if k == "says"]
    if said:
        return tuple(said[0])
    crash = getattr(report.longrepr, "reprcrash", None)
    return None, (crash.message if crash is not None else None)


def summary_lines(verdicts: dict[str, dict]) -> list[str]:
    """Per property in catalog order: its verdict (and where its
    counterexample is; why it is not applicable, what part of it is not),
    the windows its search reached, what else it found."""
    from properties.catalog import code_order  # pylint: disable=import-outside-toplevel

    lines = []
    for code in sorted(verdicts, key=code_order):
        entry = verdicts[code]
        where = f"  -> {entry['counterexample']}" if entry["counterexample"] else ""
        lines.append(f"  {entry['verdict']:<9} {code} {entry['title']}{where}")
        named = entry.get("findings", {})
        if code in named:
            lines.append(f"            {finding_line(named[code])}")
        if entry.get("why"):
            lines.append(f"            {entry['why']}")
        for part in entry.get("left_out", []):
            lines.append(f"            not applicable here: {part}")
        if entry["windows"]:
            lines.append(f"            {windows_line(entry)}")
        if entry.get("windows_not_applicable"):
            lines.append(
                "            windows not applicable here: " + ", ".join(entry["windows_not_applicable"]),
            )
        if entry.get("pairs"):
            lines.append(f"            {pairs_line(entry)}")
        elif entry.get("pairs_not_applicable"):
            lines.append(f"            pairs not applicable here: {entry['pairs_not_applicable']}")
        for other, written in entry["also_found"].items():
            lines.append(f"            its search also found {other} -> {written}")
            if other in named:
                lines.append(f"              {finding_line(named[other])}")
    return lines


def finding_line(named: dict) -> str:
    """``finding F1: title; confirmed by ...; upstream report ...`` (from
    :func:`.findings.record`)."""
    if not named["finding"]:
        return "finding: none in the known list covers it (new, or on a release its entry does not list)"
    title = f" ({named['title']})" if named["title"] else ""
    confirmed = ", ".join(named["confirmed_by"]) or "no script yet"
    upstream = ", ".join(named["upstream"]) or "none written"
    return f"finding {named['finding']}{title}; confirmed by {confirmed}; upstream report: {upstream}"


def windows_line(entry: dict) -> str:
    """``reached: w ×3, v ×1`` or ``unreached: u (reached: w ×3)``."""
    counts = entry["windows"]
    reached = ", ".join(f"{w} ×{n}" for w, n in counts.items() if n)
    unreached = [w for w, n in counts.items() if not n]
    if unreached:
        return f"unreached: {', '.join(unreached)}" + (f" (reached: {reached})" if reached else "")
    return f"reached: {reached}"


def pairs_line(entry: dict) -> str:
    """``unreached pairs (58 of 60 orders reached): p.wake⇄c.lock`` or
    ``pairs: all 60 orders the protocol allows reached``."""
    from properties.reach import line  # pylint: disable=import-outside-toplevel

    return line(entry["pairs"])


def write_json(target: Path, verdicts: dict[str, dict], deployment: dict) -> None:
    """The verdicts, with the agentscope they are of, the deployment they
    were searched on (``{"bus": ..., "nodes": ...}``), whether the
    reference fix was on, and the user's patch layer (only when one was)."""
    import reference_fix  # pylint: disable=import-outside-toplevel

    from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        json.dumps(
            {
                "agentscope_version": agentscope_under_test.version(),
                "agentscope_path": where_agentscope_came_from(agentscope_under_test.path()),
                "deployment": deployment,
                "reference_fix": reference_fix.is_applied(),
                **({"patch": patch_layer.record()} if patch_layer.record() else {}),
                "verdicts": verdicts,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )

"""The property suite's verdicts as the pytest plugin reports them: what a
failing test's story expected and what happened, the summary's lines, and
the JSON ``--verdicts-json`` writes (what ``hitl-harness gate`` reads)."""
from __future__ import annotations

import json
from pathlib import Path

from harness.world import agentscope_under_test


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
    counterexample is), the windows its search reached, what else it found."""
    from properties.catalog import code_order  # pylint: disable=import-outside-toplevel

    lines = []
    for code in sorted(verdicts, key=code_order):
        entry = verdicts[code]
        where = f"  -> {entry['counterexample']}" if entry["counterexample"] else ""
        lines.append(f"  {entry['verdict']:<9} {code} {entry['title']}{where}")
        if entry["windows"]:
            lines.append(f"            {windows_line(entry)}")
        for other, written in entry["also_found"].items():
            lines.append(f"            its search also found {other} -> {written}")
    return lines


def windows_line(entry: dict) -> str:
    """``reached: w ×3, v ×1`` or ``unreached: u (reached: w ×3)``."""
    counts = entry["windows"]
    reached = ", ".join(f"{w} ×{n}" for w, n in counts.items() if n)
    unreached = [w for w, n in counts.items() if not n]
    if unreached:
        return f"unreached: {', '.join(unreached)}" + (f" (reached: {reached})" if reached else "")
    return f"reached: {reached}"


def write_json(target: Path, verdicts: dict[str, dict]) -> None:
    """The verdicts, with the agentscope they are of and whether the
    reference fix was on."""
    import reference_fix  # pylint: disable=import-outside-toplevel

    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        json.dumps(
            {
                "agentscope_version": agentscope_under_test.version(),
                "agentscope_path": agentscope_under_test.path(),
                "reference_fix": reference_fix.is_applied(),
                "verdicts": verdicts,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )

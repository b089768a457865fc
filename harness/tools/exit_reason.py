"""The last line of a run of the property suite: why its exit code is what
it is, in one line (``exit 1: no searched property violated; found on the
way: I1 (F1) -> counterexamples/I1-...``), the findings named from the
known list (``docs/findings/known.json``) where the harness has it."""
from __future__ import annotations

from pathlib import Path

import pytest

#: The project's known violations, where the harness is a checkout.
KNOWN = Path(__file__).resolve().parents[2] / "docs" / "findings" / "known.json"

#: The exit code of a run ended by Ctrl-C (128 + SIGINT), as a shell's.
INTERRUPTED = 130


def _known() -> list:
    # the gate's package imports this plugin's module: read once both are loaded
    from .gate import known as known_list  # pylint: disable=import-outside-toplevel

    try:
        return known_list.load(KNOWN)
    except (OSError, known_list.BadList):
        return []


def _named(known, code: str, search: str, version: str | None) -> str:
    from .gate.known import findings  # pylint: disable=import-outside-toplevel

    names, _ = findings(known, code, [search], version)
    return f" ({', '.join(names)})" if names else ""


def _violations(verdicts: dict[str, dict], version: str | None) -> tuple[list[str], list[str]]:
    """The searched properties violated, and the violations found on the
    way, each as ``I1 (F1) -> folder``."""
    known = _known()
    violated, on_the_way = [], []
    for code, entry in verdicts.items():
        if entry["verdict"] in ("VIOLATED", "crash"):
            where = f" -> {entry['counterexample']}" if entry.get("counterexample") else ""
            violated.append(f"{code}{_named(known, code, code, version)}{where}")
        for other, folder in entry.get("also_found", {}).items():
            on_the_way.append(f"{other}{_named(known, other, code, version)} -> {folder}")
    return violated, on_the_way


def reason(exitstatus: int, verdicts: dict[str, dict], version: str | None) -> str:
    """``exit N: why``, from the run's exit code and its verdicts (in the
    order the properties finished)."""
    errors = [code for code, entry in verdicts.items() if entry["verdict"] == "ERROR"]
    violated, on_the_way = _violations(verdicts, version)
    found = f"found on the way: {', '.join(on_the_way)}" if on_the_way else ""
    if exitstatus == pytest.ExitCode.OK:
        held = sum(entry["verdict"] == "holds" for entry in verdicts.values())
        rest = len(verdicts) - held
        return (f"exit 0: {held} searched propert{'y' if held == 1 else 'ies'} held"
                + (f" ({rest} not applicable or skipped)" if rest else "")
                + " and no search found another's violation")
    if exitstatus == pytest.ExitCode.TESTS_FAILED:
        parts = []
        if violated:
            parts.append(f"violated: {', '.join(violated)}")
        if errors:
            parts.append(f"search broke with no story (ERROR): {', '.join(errors)}")
        if not parts:
            parts.append("no searched property violated" if verdicts else "a test failed")
        return "exit 1: " + "; ".join(parts + ([found] if found else []))
    if exitstatus == INTERRUPTED:
        return f"exit {INTERRUPTED}: interrupted (Ctrl-C); {len(verdicts)} properties had verdicts"
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        return "exit 5: no test was collected (does -k or the path name a property?)"
    if exitstatus == pytest.ExitCode.USAGE_ERROR:
        return "exit 4: the command line was wrong (the error above)"
    return f"exit {int(exitstatus)}: pytest or the harness broke (the error above)"

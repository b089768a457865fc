"""The last line of a run of the property suite: why its exit code is what
it is, in one line (``exit 1: no searched property violated; found on the
way: I1 (F1) -> counterexamples/I1-...``), the findings named from the
known list (``docs/findings/known.json``) where the harness has it."""
from __future__ import annotations

import pytest

from harness.world.deployment import Deployment

#: The exit code of a run ended by Ctrl-C (128 + SIGINT), as a shell's.
INTERRUPTED = 130


def _named(code: str, search: str, version: str | None, deployment: Deployment) -> str:
    from .findings import named  # pylint: disable=import-outside-toplevel

    found = named(code, [search], version, deployment)
    return f" ({found.finding})" if found is not None and found.finding else ""


def _violations(verdicts: dict[str, dict], version: str | None,
                deployment: Deployment) -> tuple[list[str], list[str]]:
    """The searched properties violated, and the violations found on the
    way, each as ``I1 (F1) -> folder``."""
    violated, on_the_way = [], []
    for code, entry in verdicts.items():
        if entry["verdict"] in ("VIOLATED", "crash"):
            where = f" -> {entry['counterexample']}" if entry.get("counterexample") else ""
            violated.append(f"{code}{_named(code, code, version, deployment)}{where}")
        for other, folder in entry.get("also_found", {}).items():
            on_the_way.append(f"{other}{_named(other, code, version, deployment)} -> {folder}")
    return violated, on_the_way


def reason(exitstatus: int, verdicts: dict[str, dict], version: str | None,
           deployment: Deployment = Deployment()) -> str:
    """``exit N: why``, from the run's exit code and its verdicts (in the
    order the properties finished), searched on ``deployment``."""
    errors = [code for code, entry in verdicts.items() if entry["verdict"] == "ERROR"]
    violated, on_the_way = _violations(verdicts, version, deployment)
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

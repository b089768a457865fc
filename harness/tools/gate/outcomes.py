"""What a gate says about each SPEC, and the exit code it ends with.

A property violation and a SPEC the gate could not run are different news,
so they end with different exit codes. When SPECs end differently, the
lowest non-zero code wins: a violation is the most important news. A
violation that is known, or that the baseline had too, is shown but does
not fail the gate (:mod:`.compare`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ..pytest_plugin import NOT_APPLICABLE
from ..verdicts import ERROR


class Exit(IntEnum):
    """The gate's exit codes (documented in the README)."""

    HOLDS = 0  # every property holds on every SPEC
    VIOLATED = 1  # some property is VIOLATED (a counterexample was written)
    USAGE = 2  # the command line was wrong
    NOT_AGENTSCOPE = 3  # a SPEC names no agentscope (no such release, not a wheel/checkout)
    INSTALL_FAILED = 4  # an environment could not be built
    CANNOT_DRIVE = 5  # the harness cannot drive this agentscope (a name or signature it missed)
    RUN_BROKE = 6  # the property run itself broke (see its log)
    DID_NOT_FINISH = 7  # the property suite did not finish within its --budget
    HARNESS_ERROR = 8  # a property's search broke with no story (ERROR): nothing learnt
    INTERRUPTED = 130  # Ctrl-C: what finished is kept, the rest is marked interrupted


#: The exit codes in words, as the gate's last line says them.
MEANING = {
    Exit.HOLDS: "every property holds on every SPEC",
    Exit.VIOLATED: "a property is VIOLATED",
    Exit.USAGE: "the command line was wrong",
    Exit.NOT_AGENTSCOPE: "a SPEC names no agentscope",
    Exit.INSTALL_FAILED: "an environment could not be built",
    Exit.CANNOT_DRIVE: "the harness cannot drive an agentscope",
    Exit.RUN_BROKE: "a property run broke",
    Exit.DID_NOT_FINISH: "a property suite did not finish within its budget",
    Exit.HARNESS_ERROR: "a property's search broke without a story (ERROR)",
    Exit.INTERRUPTED: "interrupted (Ctrl-C) before every SPEC finished",
}

#: The version of the JSON a gate writes (``--json``): 2 added ``schema``,
#: how the gate ran, and per verdict its time, classification, expected and
#: actual. A file with no ``schema`` is version 1 (the same specs).
JSON_SCHEMA = 2

#: The versions a gate reads (``--baseline-json``, ``merge``).
JSON_READABLE = (1, 2)

#: What a "could not run" row says before its one-line reason.
COULD_NOT_RUN = {
    Exit.NOT_AGENTSCOPE: "no such agentscope",
    Exit.INSTALL_FAILED: "install failed",
    Exit.CANNOT_DRIVE: "harness cannot drive it",
    Exit.RUN_BROKE: "the run broke",
    Exit.DID_NOT_FINISH: "did not finish",
    Exit.INTERRUPTED: "interrupted",
}


@dataclass
class Row:
    """One SPEC's line in the table."""

    name: str
    outcome: Exit = Exit.HOLDS
    reason: str | None = None
    version: str | None = None
    path: str | None = None
    fix: str = "off"
    verdicts: dict[str, dict] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    role: str = "candidate"  # or "baseline": what the candidates are compared with
    baseline: str | None = None  # the baseline row's name, once compared
    #: Per property: its classification against the baseline and the known
    #: violations (:mod:`.compare`).
    comparison: dict[str, dict] = field(default_factory=dict)
    #: The properties whose violation fails the gate (``None``: not compared,
    #: so every violation does).
    new: list[str] | None = None
    #: The committed counterexamples replayed before any search, one entry
    #: per folder (:mod:`.pregate`).
    pregate: list[dict] = field(default_factory=list)

    def could_not_run(self, outcome: Exit, reason: str) -> Row:
        self.outcome, self.reason = outcome, reason
        return self

    @property
    def kind(self) -> str:
        """A row without verdicts either ``did not finish`` (its suite ran
        out of its budget) or ``could not run``."""
        if self.outcome == Exit.INTERRUPTED:
            return "interrupted"
        return "did not finish" if self.outcome == Exit.DID_NOT_FINISH else "could not run"

    @property
    def headline(self) -> str:
        """What the table says of a row without verdicts: ``did not
        finish``, or ``could not run (what stopped it)``."""
        if self.outcome in (Exit.DID_NOT_FINISH, Exit.INTERRUPTED):
            return self.kind
        return f"{self.kind} ({COULD_NOT_RUN[self.outcome]})"

    def judge(self) -> None:
        """Set the outcome from the verdicts."""
        if any(violated(v) or v.get("also_found") for v in self.verdicts.values()):
            self.outcome = Exit.VIOLATED
        elif any(v.get("verdict") == ERROR for v in self.verdicts.values()):
            self.outcome = Exit.HARNESS_ERROR


def violated(verdict: dict) -> bool:
    """Whether a property's own search found it broken: anything but
    "holds", "not applicable" and ERROR (a search that broke with no story
    says nothing of agentscope)."""
    return verdict.get("verdict") not in ("holds", NOT_APPLICABLE, ERROR)


def code_order(code: str):
    """The catalog's sort key for property codes (I2 before I10), imported
    when first needed: the catalog imports agentscope, which a gate refusing
    its command line must not wait for."""
    from properties.catalog import code_order as order  # pylint: disable=import-outside-toplevel

    return order(code)


def exit_code(rows: list[Row]) -> Exit:
    """The lowest non-zero outcome among ``rows`` (0 if all hold). A row
    whose violations are all known, or were there on the baseline, does not
    fail."""
    failing = [
        r.outcome for r in rows
        if r.outcome != Exit.HOLDS and not (r.outcome == Exit.VIOLATED and r.new == [])
    ]
    return min(failing) if failing else Exit.HOLDS

"""The operation trace: who did what to the bus, in which order.

Every bus operation executed under control becomes one :class:`TraceEntry`
(task, operation, key, result). Two runs of the same Hypothesis example
must produce byte-identical traces; a counterexample report prints the
trace as a per-task timeline. Session ids are rendered through an alias
map ("worker", "leader", ...) so a person can read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TraceEntry:
    """One bus operation as it was executed."""

    seq: int
    task: str
    op: str
    key: str
    detail: str = ""

    def render(self, aliases: dict[str, str]) -> str:
        """One line, with session ids replaced by their aliases."""
        text = f"{self.seq:4d}  {self.task:<34} {self.op:<14} {self.key}"
        if self.detail:
            text += f"  -> {self.detail}"
        return apply_aliases(text, aliases)


def apply_aliases(text: str, aliases: dict[str, str]) -> str:
    """Replace every raw id in ``text`` with its readable alias."""
    for raw, alias in sorted(aliases.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(raw, alias)
    return text


@dataclass
class Trace:
    """An append-only list of :class:`TraceEntry` with a few views."""

    entries: list[TraceEntry] = field(default_factory=list)
    #: Operations left out (repetitions skipped), counted in the numbering.
    left_out: int = 0

    def record(self, task: str, op: str, key: str, detail: str = "") -> None:
        """Append one executed operation."""
        self.entries.append(
            TraceEntry(len(self.entries) + self.left_out + 1, task, op, key, detail),
        )

    def skipped(self, operations: int, note: str) -> None:
        """``operations`` were left out (a repetition of the world, see
        :mod:`.repeats`): one line says so, and the numbering after it is
        what it would have been."""
        self.entries.append(TraceEntry(len(self.entries) + self.left_out + 1, "harness", "left out", "", note))
        self.left_out += operations - 1

    def render(self, aliases: dict[str, str] | None = None) -> str:
        """The whole trace, one operation per line."""
        aliases = aliases or {}
        return "\n".join(entry.render(aliases) for entry in self.entries)

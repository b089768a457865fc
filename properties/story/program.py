"""Reading a failure as a story: the program its notes name.

Hypothesis prints a failing stateful test as a program (``state = M()``,
then one ``state.rule(...)`` line per step) and attaches it to the
exception as notes; :mod:`.shrink` names a shrunk story the same way.
:func:`story_steps` gives those steps back, so tests and reports can check
and show the story without parsing terminal output.
"""
from __future__ import annotations

import re

_STEP = re.compile(r"^state\.(\w+)\((.*)\)$")


def program_lines(error: BaseException) -> list[str]:
    """The ``state...`` lines of the failing program, teardown excluded."""
    lines = [str(note).strip() for note in getattr(error, "__notes__", [])]
    return [
        line
        for line in lines
        if line.startswith("state.") and not line.startswith("state.teardown(")
    ]


def story_steps(error: BaseException) -> list[tuple[str, str]]:
    """``(rule, arguments)`` for each step of the failing program."""
    steps = []
    for line in program_lines(error):
        match = _STEP.match(line)
        if match:
            steps.append((match.group(1), match.group(2)))
    return steps

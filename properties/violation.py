"""How a property says it broke.

A check raises :class:`Broken` with what was expected and what happened;
the property's catalog record (:mod:`properties.catalog`) turns it into an
:class:`InvariantViolated` carrying the property's code and title, so a
check never retypes either.
"""
from __future__ import annotations

#: How a violation's message introduces what was expected and what happened.
EXPECTED, ACTUAL = "\n  expected: ", "\n  actual:   "


def expected_and_actual(message: str) -> tuple[str, str] | None:
    """What an :class:`InvariantViolated` message (or a record of one, its
    ids renamed) says was expected and happened; None for another message."""
    head, found, rest = message.partition(EXPECTED)
    expected, found_actual, actual = rest.partition(ACTUAL)
    if not (head and found and found_actual):
        return None
    return expected.strip(), actual.strip()


class Broken(AssertionError):
    """Raised by a check: expected versus actual, in words."""

    def __init__(self, expected: str, actual: str):
        self.expected = expected
        self.actual = actual
        super().__init__(f"expected: {expected}\n  actual:   {actual}")


class InvariantViolated(AssertionError):
    """An invariant did not hold. ``code`` is its short name (I1, I2, …)."""

    def __init__(self, code: str, title: str, expected: str, actual: str):
        self.code = code
        self.title = title
        self.expected = expected
        self.actual = actual
        super().__init__(f"{code} {title}{EXPECTED}{expected}{ACTUAL}{actual}")


class UnexpectedFailure(AssertionError):
    """A task of the world ended with an exception no rule injected (or the
    loop reported one): the story fails, whatever property it searched."""

    title = "an exception no rule injected"

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("an exception no rule injected:\n  " + "\n  ".join(lines))

"""The locked toolchain: ``requirements/toolchain.txt``.

The ``ci`` search is Hypothesis' own derandomized draw, so a verdict holds
for the Hypothesis it was recorded with; the lock pins it, with the rest
of what runs the suite. Files that record verdicts or stories (the
expected verdicts, ``story.json``) record :func:`hypothesis_version`, and
whoever reads one back under another version says so in one line
(:func:`version_note`).
"""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

#: The lock, beside the project's sources (absent from a wheel install).
LOCK = Path(__file__).resolve().parents[2] / "requirements" / "toolchain.txt"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    """Every package the lock pins, by canonical name ({} without a lock)."""
    if not LOCK.is_file():
        return {}
    pins = (_PIN.match(line) for line in LOCK.read_text().splitlines())
    return {_canonical(m[1]): m[2] for m in pins if m}


def installed(name: str) -> str | None:
    """The installed version of ``name`` (None if it is not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def drift() -> list[str]:
    """``name installed (lock X)`` for each locked package installed at
    another version; empty when the toolchain is the lock."""
    return [
        f"{name} {installed(name)} (lock {version})"
        for name, version in sorted(locked().items())
        if installed(name) not in (None, version)
    ]


def hypothesis_version() -> str:
    """The Hypothesis that draws the stories."""
    return installed("hypothesis") or "unknown"


def version_note(recorded: str | None, what: str) -> str | None:
    """One line when ``what`` was recorded under another Hypothesis than the
    installed one (None when they agree, or nothing was recorded)."""
    if not recorded or recorded == hypothesis_version():
        return None
    return (
        f"note: {what} was recorded with Hypothesis {recorded}, this is {hypothesis_version()}:"
        " a search may go another way (requirements/toolchain.txt locks the version)"
    )

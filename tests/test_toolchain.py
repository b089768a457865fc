"""The locked toolchain: what runs here is the lock, the [pinned] install
is the lock, and every recorded verdict says which Hypothesis made it."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

from harness.tools import toolchain

ROOT = Path(__file__).resolve().parent.parent

#: What the verdicts depend on; the lock must pin each.
LOCKED = ("hypothesis", "pytest", "pytest-xdist", "pytest-asyncio", "anyio", "redis", "aiosqlite")


def test_the_lock_pins_the_whole_toolchain():
    pins = toolchain.locked()
    assert set(LOCKED) <= set(pins), f"not locked: {sorted(set(LOCKED) - set(pins))}"
    declared = (toolchain.LOCK.with_suffix(".in")).read_text().split()
    assert all(name in declared for name in LOCKED)


def test_the_suite_runs_on_the_lock():
    assert toolchain.drift() == [], (
        "this environment is not the lock; reinstall with "
        "pip install -e '.[pinned]' -c requirements/toolchain.txt"
    )


def test_the_pinned_install_is_the_lock():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    files = project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]["pinned"]["file"]
    assert "requirements/toolchain.txt" in files
    assert all((ROOT / f).is_file() for f in files)


def test_each_expected_verdict_file_names_the_locked_hypothesis():
    for path in sorted((ROOT / "docs" / "findings").glob("expected-*.json")):
        recorded = json.loads(path.read_text())["hypothesis"]
        assert recorded == toolchain.locked()["hypothesis"], f"{path.name} was recorded with {recorded}"


def test_another_hypothesis_is_said_in_one_line():
    assert toolchain.version_note(toolchain.hypothesis_version(), "x") is None
    assert toolchain.version_note("", "x") is None  # recorded before versions were
    note = toolchain.version_note("6.0.0", "expected-2.0.8.json")
    assert note is not None and "\n" not in note
    assert "6.0.0" in note and toolchain.hypothesis_version() in note

"""The standalone reproductions shipped with the upstream reports.

Each ``docs/upstream/<finding>_repro.py`` imports only agentscope and the
standard library (and ``redis`` for the Redis ones). It must exit 1 on the
installed agentscope (the bug shows) and 0 once the report's proposed
patch is applied to a copy of that agentscope. Each report quotes its
script whole, and the quote must equal the file.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "docs" / "upstream"
PATCHES = ROOT / "patches"

#: The reports with a standalone repro.
FINDINGS = ("F3", "F4b", "F5", "F6", "F8", "F10", "F13", "F18")

#: Per report, the fixes its "Proposed patch" section names, applied
#: together, and the exit code its repro gives with them.
PATCHED: list[tuple[str, tuple[str, ...], int]] = [
    ("F3", ("stop-after-parking",), 0),
    ("F4b", ("resubscribe",), 0),
    ("F5", ("inbox-sweeper",), 0),
    ("F6", ("stop-reaches-slow-tools",), 0),
    ("F8", ("clean-up-survives-stops",), 0),
    # Exit 0: the confirmed call runs (clean-up-survives-stops alone), or
    # the stop that landed in the clean-up ends the reply (with
    # stop-after-parking too; the report says which).
    ("F10", ("clean-up-survives-stops",), 0),
    ("F10", ("clean-up-survives-stops", "stop-after-parking"), 0),
    ("F13", ("message-while-parked",), 0),
    ("F18", ("drain-survives-stops",), 0),
]

#: Longest a repro may take.
TIMEOUT = 120


def _installed() -> tuple[str, Path]:
    """The installed agentscope's version and package folder."""
    out = subprocess.run(
        [sys.executable, "-c",
         "import agentscope, os; print(agentscope.__version__); print(os.path.dirname(agentscope.__file__))"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")
    return out[0].strip(), Path(out[1].strip())


def _run(script: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if pythonpath is not None:
        import os

        env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True,
        timeout=TIMEOUT, env=env, cwd=script.parent,
    )


def _explain(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def patched_copies(tmp_path_factory):
    """``fixes -> folder`` holding a copy of the installed agentscope with
    those fixes' diffs applied (``patch -p2``: the diffs name
    ``src/agentscope/...``)."""
    version, package = _installed()
    made: dict[tuple[str, ...], Path] = {}

    def copy_with(fixes: tuple[str, ...]) -> Path:
        if fixes not in made:
            site = tmp_path_factory.mktemp("patched")
            shutil.copytree(package, site / "agentscope",
                            ignore=shutil.ignore_patterns("__pycache__"))
            for fix in fixes:
                diff = PATCHES / f"agentscope-{version}-{fix}.diff"
                assert diff.exists(), f"no {fix} diff for agentscope {version}: python -m reference_fix.diffs writes it"
                done = subprocess.run(
                    ["patch", "-p2", "--batch", "--forward", "--no-backup-if-mismatch", "-d", str(site), "-i", str(diff)],
                    capture_output=True, text=True,
                )
                assert done.returncode == 0, f"{diff.name} does not apply:\n{done.stdout}{done.stderr}"
            made[fixes] = site
        return made[fixes]

    return copy_with


def _needs_redis(finding: str) -> None:
    """A Redis report fails, never skips, without a redis-server."""
    if finding in ("F4b", "F5", "F13") and shutil.which("redis-server") is None:
        pytest.fail("RedisServerMissing: redis-server is not installed (apt-get install redis-server)",
                    pytrace=False)


@pytest.mark.parametrize("finding", FINDINGS)
def test_repro_shows_the_bug(finding):
    _needs_redis(finding)
    done = _run(UPSTREAM / f"{finding}_repro.py")
    assert done.returncode == 1, _explain(done)


@pytest.mark.parametrize(
    ("finding", "fixes", "expected"), PATCHED,
    ids=[f"{f}-{'+'.join(fixes)}" for f, fixes, _ in PATCHED],
)
def test_repro_with_the_patch(finding, fixes, expected, patched_copies):
    _needs_redis(finding)
    site = patched_copies(fixes)
    done = _run(UPSTREAM / f"{finding}_repro.py", pythonpath=site)
    assert str(site) in _imported_from(site), "the patched copy was not the one imported"
    assert done.returncode == expected, _explain(done)


def _imported_from(site: Path) -> str:
    import os

    return subprocess.run(
        [sys.executable, "-c", "import agentscope; print(agentscope.__file__)"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(site)),
    ).stdout


@pytest.mark.parametrize("finding", FINDINGS)
def test_report_quotes_its_repro(finding):
    report = (UPSTREAM / f"{finding}.md").read_text()
    section = report.split("## Reproduce", 1)[1]
    quoted = re.search(r"```python\n(.*?)```", section, re.S)
    assert quoted, f"{finding}.md has no python block in its Reproduce section"
    assert quoted.group(1) == (UPSTREAM / f"{finding}_repro.py").read_text()

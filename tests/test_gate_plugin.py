"""The harness's pytest plugin loads in every project of a virtual
environment it is installed in (a ``pytest11`` entry point), and changes
nothing in their tests: a scratch project with its own Hypothesis profile
keeps it, sees agentscope's logs and warnings, and gets no harness header,
unless it asks with ``--hitl-harness``."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from harness.tools import pytest_plugin

CONFTEST = '''
from hypothesis import settings

settings.register_profile("scratch", max_examples=500)
settings.load_profile("scratch")
'''

TESTS = '''
import logging
import warnings

from hypothesis import given, settings, strategies as st

SEEN = []


@given(st.integers())
def test_own_profile(n):
    SEEN.append(n)


def test_own_settings_are_kept():
    current = settings()
    print(f"SETTINGS profile={settings.get_current_profile_name()} "
          f"max_examples={current.max_examples} database={current.database is not None} "
          f"deadline={current.deadline} derandomize={current.derandomize} "
          f"steps={current.stateful_step_count}")
    assert settings.get_current_profile_name() == "scratch"
    assert current.max_examples == 500


def test_agentscope_logs_and_warnings_are_left_alone():
    assert logging.getLogger("agentscope").level != logging.CRITICAL + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.warn_explicit("old", DeprecationWarning, "agentscope/x.py", 1, module="agentscope.x")
    assert [str(w.message) for w in caught] == ["old"]
    ignored = [f for f in warnings.filters if f[0] == "ignore" and f[3] is not None
               and "agentscope" in f[3].pattern]
    assert ignored == []
'''


def _scratch(tmp_path: Path) -> Path:
    project = tmp_path / "scratch"
    project.mkdir()
    (project / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (project / "test_scratch.py").write_text(TESTS, encoding="utf-8")
    return project


def _pytest(project: Path, *options: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTEST_", "HITL_")) and k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-rA", *options],
        cwd=project, env=environ, capture_output=True, text=True, timeout=300, check=False,
    )


def test_the_plugin_is_installed_as_a_pytest11_entry_point():
    names = {e.value for e in metadata.entry_points(group="pytest11")}
    assert "harness.tools.pytest_plugin" in names


def _settings(output: str) -> str:
    """The settings line the scratch test printed (after pytest's progress dot)."""
    return re.search(r"SETTINGS .*", output).group(0)


def test_a_scratch_project_keeps_its_own_profile_logs_and_warnings(tmp_path):
    project = _scratch(tmp_path)
    done = _pytest(project)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "agentscope-hitl-harness" in done.stdout  # the plugin was loaded...
    assert "hitl-harness:" not in done.stdout  # ...and said nothing
    # the very settings the project gets without the harness (Hypothesis' own
    # defaults differ in CI, so they are measured, not written down)
    alone = _pytest(project, "-p", "no:harness.tools.pytest_plugin")
    assert "agentscope-hitl-harness" not in alone.stdout
    assert _settings(done.stdout) == _settings(alone.stdout)
    assert "profile=scratch max_examples=500" in _settings(done.stdout)


def test_the_option_asks_for_the_harness_explicitly(tmp_path):
    done = _pytest(_scratch(tmp_path), "--hitl-harness", "-k", "own_settings")
    assert "hitl-harness: testing agentscope" in done.stdout
    assert "AssertionError" in done.stdout  # the harness's profile replaced the project's
    assert "max_examples=500" not in done.stdout


@pytest.mark.parametrize(("args", "ours"), [
    (["properties"], True),
    (["properties/test_invariants_hold.py::test_invariant_holds"], True),
    (["tests/test_gate.py"], True),
    (["{elsewhere}"], False),
])
def test_the_harness_run_is_told_by_what_is_collected(args, ours, pytestconfig, tmp_path):
    class Config:  # what is_harness_run reads of pytest's config
        invocation_params = pytestconfig.invocation_params

        def __init__(self):
            self.args = [a.format(elsewhere=tmp_path) for a in args]

        @staticmethod
        def getoption(_name):
            return False

    root = Path(pytest_plugin.__file__).resolve().parents[2]
    Config.invocation_params = type("P", (), {"dir": root})()
    assert pytest_plugin.is_harness_run(Config()) is ours

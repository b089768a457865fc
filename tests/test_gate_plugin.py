"""The harness's ``pytest11`` entry point loads in every project of a
virtual environment it is installed in, and changes nothing in their tests:
a scratch project with its own Hypothesis profile keeps it, sees
agentscope's logs and warnings, and gets no harness header, unless it asks
with ``--hitl-harness``. A host project with its own ``properties.py``,
``harness.py``, ``fakes/`` and ``--nodes`` runs as if the harness were not
installed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import hitl_harness_pytest

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


def test_the_guest_is_installed_as_a_pytest11_entry_point():
    entries = {e.name: e.value for e in metadata.entry_points(group="pytest11")}
    assert entries.get("hitl_harness_pytest") == "hitl_harness_pytest"
    assert "harness.tools.pytest_plugin" not in entries.values()


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
    alone = _pytest(project, "-p", "no:hitl_harness_pytest")
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

    Config.invocation_params = type("P", (), {"dir": hitl_harness_pytest.ROOT})()
    assert hitl_harness_pytest.is_harness_run(Config()) is ours


# ── a host project whose own names are the harness's ──────────────────

HOST_CONFTEST = '''
def pytest_addoption(parser):
    parser.addoption("--nodes", type=int, default=3)
'''

HOST_TESTS = '''
import sys

import fakes
import harness
import properties


def test_its_own_modules(request):
    assert properties.OWN == "host properties" and harness.OWN == "host harness"
    assert fakes.OWN == "host fakes"
    assert request.config.getoption("--nodes") == 3


def test_nothing_of_the_harness_is_imported():
    assert not [m for m in sys.modules if m.startswith(("harness.", "properties.", "fakes."))]
'''


def _host(tmp_path: Path) -> Path:
    host = tmp_path / "host"
    (host / "fakes").mkdir(parents=True)
    (host / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (host / "properties.py").write_text('OWN = "host properties"\n', encoding="utf-8")
    (host / "harness.py").write_text('OWN = "host harness"\n', encoding="utf-8")
    (host / "fakes" / "__init__.py").write_text('OWN = "host fakes"\n', encoding="utf-8")
    (host / "conftest.py").write_text(HOST_CONFTEST, encoding="utf-8")
    (host / "test_host.py").write_text(HOST_TESTS, encoding="utf-8")
    return host


def test_a_host_with_the_harness_s_names_runs_unaffected(tmp_path):
    host = _host(tmp_path)
    done = _pytest(host, "--nodes", "3")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
    assert "agentscope-hitl-harness" in done.stdout  # the guest was loaded, and stayed inert
    assert "hitl-harness:" not in done.stdout
    assert "--hitl-nodes" in _pytest(host, "--help").stdout  # its options, prefixed


def test_asking_for_the_harness_in_such_a_host_is_one_line(tmp_path):
    done = _pytest(_host(tmp_path), "--hitl-harness")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "hide its packages: harness" in said[0], done.stderr
    assert "properties (" in said[0] and "fakes (" in said[0]


def test_the_option_turns_the_plugin_on_in_a_host_with_its_own_conftest(tmp_path):
    host = tmp_path / "plain"
    host.mkdir()
    (host / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (host / "conftest.py").write_text(HOST_CONFTEST, encoding="utf-8")
    (host / "test_plain.py").write_text(
        "import sys\n\n\ndef test_plain(request):\n"
        "    assert request.config.getoption('--nodes') == 3\n"
        "    assert 'harness.tools.pytest_plugin' in sys.modules\n", encoding="utf-8")
    done = _pytest(host, "--hitl-harness")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "hitl-harness: testing agentscope" in done.stdout

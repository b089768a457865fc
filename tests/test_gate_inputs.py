"""Every input of a gate is checked before any work, and a mistake is one
line and exit 2 within seconds."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from packaging.version import Version

from harness.tools.cli import main
from harness.tools.gate import environments, inputs, specs
from harness.tools.gate.outcomes import Exit

RELEASES = tuple(Version(v) for v in ("2.0.7", "2.0.8", "2.0.9", "2.0.10", "2.0.11"))

#: An index nobody can reach: a gate that asks it fails differently.
NO_INDEX = "file:///nonexistent/simple"


def _no_index():
    raise AssertionError("the index was asked before every SPEC's form was checked")


@pytest.mark.parametrize(("argv", "says"), [
    (["abc"], "'abc' is neither a release, a version range, 'latest', a wheel file nor a folder"),
    (["2.0.11", "abc"], "'abc' is neither"),
    (["2.0.11", "--json", "/nonexistent/dir/v.json"], "--json /nonexistent/dir/v.json: no such folder"),
    (["2.0.11", "--junit", "/nonexistent/dir/v.xml"], "--junit /nonexistent/dir/v.xml: no such folder"),
    (["2.0.11", "2.0.11x"], "'2.0.11x' is not a version number"),
    (["2.0.11", "--baseline", "nonsense"], "'nonsense' is neither"),
    (["2.0.11", "--known", "/nonexistent/known.json"], "--known /nonexistent/known.json: No such file"),
    (["2.0.11", "--baseline-json", "/nonexistent/v.json"], "--baseline-json /nonexistent/v.json: No such"),
])
def test_a_mistake_is_one_line_and_exit_2_before_anything_runs(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(specs, "released", _no_index)
    monkeypatch.setattr(environments, "ensure", _no_index)
    assert main(["gate", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("hitl-harness gate: error: ") and says in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["abc"], ["2.0.11", "abc"], ["2.0.11", "--json", "/nonexistent/dir/v.json"],
])
def test_the_command_refuses_within_seconds(argv, tmp_path):
    environ = {**os.environ, "UV_DEFAULT_INDEX": NO_INDEX, "HITL_GATE_CACHE": str(tmp_path)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "gate", *argv], capture_output=True,
                          text=True, env=environ, cwd=tmp_path, timeout=60, check=False)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    assert took < 15, f"{took:.1f} s"
    assert list(tmp_path.iterdir()) == []  # no environment, no folder


def test_a_release_may_be_written_with_a_v_and_a_baseline_names_one(monkeypatch):
    monkeypatch.setattr(specs, "released", lambda: RELEASES)
    (target,) = specs.resolve("v2.0.8")
    assert (target.name, target.version) == ("2.0.8", "2.0.8")
    plan = inputs.prepare(["v2.0.9", "latest"], baseline="V2.0.8")
    assert [t.version for t in plan.candidates] == ["2.0.9", "2.0.11"]
    assert plan.baseline.version == "2.0.8"
    with pytest.raises(inputs.Refused, match="names 2 releases"):
        inputs.prepare(["2.0.9"], baseline=">=2.0.10")
    with pytest.raises(inputs.Refused) as missing:
        inputs.prepare(["2.0.9", "2.0.99"])
    assert missing.value.code == Exit.NOT_AGENTSCOPE


def test_output_paths_are_checked(tmp_path):
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    with pytest.raises(inputs.Refused, match="is a folder"):
        inputs.check_output_file("--json", tmp_path)
    with pytest.raises(inputs.Refused, match="is a file, not a folder"):
        inputs.check_output_folder("--counterexamples", tmp_path / "a-file")
    inputs.check_output_folder("--counterexamples", tmp_path / "new" / "deeper")  # made later
    inputs.check_output_file("--json", tmp_path / "v.json")


def test_refusing_a_command_line_does_not_wait_for_agentscope(tmp_path):
    """The catalog imports agentscope (seconds on a busy machine): a refused
    command line never needs it."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.tools.cli import main; "
         "code = main(['gate', '2.0.11', 'abc']); print(code, 'agentscope' in sys.modules)"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )
    assert done.stdout.split() == ["2", "False"], done.stderr

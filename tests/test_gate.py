"""The gate's parts, without building environments: what a SPEC names, the
exit code a set of outcomes ends with, the table, JSON and JUnit it writes,
and the probe that tells whether the harness can drive an agentscope.

Listing releases asks the package index; here it is replaced by a fixed
list, so these tests say the same thing offline.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from packaging.version import Version

from harness.world import agentscope_under_test
from harness.tools.cli import main
from harness.tools.gate import environments, gate, specs
from harness.tools.gate.outcomes import Exit, Row, exit_code
from harness.tools.gate.probe import probe
from harness.tools.gate.junit import write_junit
from harness.tools.gate.reports import write_json
from harness.tools.gate.table import table

RELEASES = tuple(Version(v) for v in ("2.0.7", "2.0.8", "2.0.9", "2.0.10", "2.0.11"))


@pytest.fixture(autouse=True)
def index(monkeypatch):
    monkeypatch.setattr(specs, "released", lambda: RELEASES)


# ── SPECs ─────────────────────────────────────────────────────────────


def test_a_release_is_one_target_installed_with_the_extras():
    (target,) = specs.resolve("2.0.9")
    assert (target.kind, target.version) == ("release", "2.0.9")
    assert target.install == ("agentscope[service,storage-sql]==2.0.9",)


def test_latest_is_the_newest_release_and_a_range_is_every_release_in_it():
    assert [t.version for t in specs.resolve("latest")] == ["2.0.11"]
    assert [t.version for t in specs.resolve(">=2.0.8,<2.0.11")] == ["2.0.8", "2.0.9", "2.0.10"]
    assert specs.resolve(">=2.0.8,<2.0.11")[0].name == "2.0.8 (>=2.0.8,<2.0.11)"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("2.0.999", "agentscope 2.0.999 is not a release on the package index (the newest is 2.0.11)"),
        (">=3", "no agentscope release matches '>=3'"),
        ("what?", "neither a release, a version range, 'latest', a wheel file nor a folder"),
        ("./missing.whl", "is not a file"),
    ],
)
def test_a_spec_that_names_no_agentscope_is_refused_in_one_line(spec, says):
    with pytest.raises(specs.NotAgentscope, match=None) as refused:
        specs.resolve(spec)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_folder_must_be_an_agentscope_checkout(tmp_path):
    with pytest.raises(specs.NotAgentscope, match="is not an agentscope source checkout"):
        specs.resolve(str(tmp_path))
    (tmp_path / "src" / "agentscope").mkdir(parents=True)
    (tmp_path / "src" / "agentscope" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[project]\nname='agentscope'\n", encoding="utf-8")
    (target,) = specs.resolve(str(tmp_path))
    assert target.kind == "checkout"
    assert target.install == ("--editable", f"{tmp_path.resolve()}[service,storage-sql]")


def test_a_wheel_must_be_an_agentscope_wheel(tmp_path):
    other = tmp_path / "requests-2.0-py3-none-any.whl"
    other.write_bytes(b"not really")
    with pytest.raises(specs.NotAgentscope, match="is not an agentscope wheel"):
        specs.resolve(str(other))
    wheel = tmp_path / "agentscope-2.0.8-py3-none-any.whl"
    wheel.write_bytes(b"pretend")
    (target,) = specs.resolve(str(wheel))
    assert (target.kind, target.version) == ("wheel", "2.0.8")
    assert target.identity.startswith("wheel sha256:")


def test_no_spec_means_the_pinned_release_and_the_newest():
    assert specs.default_specs() == ["2.0.8", "latest"]


def test_environments_are_keyed_by_what_is_installed():
    (a,) = specs.resolve("2.0.8")
    (b,) = specs.resolve("2.0.9")
    assert environments.key_of(a) == environments.key_of(specs.resolve("2.0.8")[0])
    assert environments.key_of(a) != environments.key_of(b)


# ── outcomes and reports ──────────────────────────────────────────────


def _rows() -> list[Row]:
    violated = Row(name="2.0.8", version="2.0.8", verdicts={
        "I1": {"title": "no-error", "verdict": "VIOLATED", "counterexample": "cx/I1-abcd1234"},
        "I2": {"title": "no-reminder", "verdict": "holds", "counterexample": None},
    })
    violated.judge()
    holds = Row(name="2.0.11", version="2.0.11", verdicts={
        "I1": {"title": "no-error", "verdict": "holds", "counterexample": None},
        "I2": {"title": "no-reminder", "verdict": "holds", "counterexample": None,
               "windows": {"resumed-turn": 7, "payload-in-parked-tail": 0}},
    })
    holds.judge()
    missing = Row(name="2.0.999").could_not_run(Exit.NOT_AGENTSCOPE, "no such release")
    return [violated, holds, missing]


def test_a_violation_is_the_most_important_news():
    rows = _rows()
    assert [r.outcome for r in rows] == [Exit.VIOLATED, Exit.HOLDS, Exit.NOT_AGENTSCOPE]
    assert exit_code(rows) == Exit.VIOLATED
    assert exit_code(rows[1:]) == Exit.NOT_AGENTSCOPE
    assert exit_code(rows[1:2]) == Exit.HOLDS
    assert exit_code([Row("a").could_not_run(Exit.CANNOT_DRIVE, "x"),
                      Row("b").could_not_run(Exit.INSTALL_FAILED, "y")]) == Exit.INSTALL_FAILED


def test_the_table_shows_each_verdict_and_where_to_look():
    text = table(_rows())
    lines = text.splitlines()
    assert lines[0].split() == ["SPEC", "fix", "I1", "I2"]
    assert lines[1].split() == ["2.0.8", "off", "X", "."]
    assert lines[2].split() == ["2.0.11", "off", ".", "."]
    assert "could not run (no such agentscope)" in lines[3]
    assert "2.0.8: I1 VIOLATED -> cx/I1-abcd1234" in text
    assert "2.0.999: could not run: no such release" in text
    assert "2.0.11: I2 holds, unreached: payload-in-parked-tail" in text  # a hollow "holds"


def test_json_and_junit_say_the_same(tmp_path):
    rows = _rows()
    write_json(rows, tmp_path / "v.json", exit_code(rows))
    data = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert data["exit_code"] == 1
    assert [s["outcome"] for s in data["specs"]] == ["violated", "holds", "not_agentscope"]
    assert data["specs"][0]["verdicts"]["I1"]["counterexample"] == "cx/I1-abcd1234"
    assert data["specs"][1]["verdicts"]["I2"]["windows"] == {"resumed-turn": 7, "payload-in-parked-tail": 0}
    write_junit(rows, tmp_path / "v.xml")
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    assert [(s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("2", "1", "0"), ("2", "0", "0"), ("1", "0", "1"),
    ]
    failure = suites[0].find("testcase/failure")
    assert "cx/I1-abcd1234" in failure.text


# ── the gate and the CLI ──────────────────────────────────────────────


def test_the_gate_refuses_what_names_no_agentscope_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(environments, "ensure", _no_work)
    code = gate(["2.0.999", str(tmp_path)], json_path=tmp_path / "v.json")
    assert code == Exit.NOT_AGENTSCOPE
    err = capsys.readouterr().err
    assert err == ("hitl-harness gate: error: agentscope 2.0.999 is not a release on the "
                   "package index (the newest is 2.0.11)\n")
    assert not (tmp_path / "v.json").exists()
    assert main(["gate", str(tmp_path)]) == 3
    assert "is not an agentscope source checkout" in capsys.readouterr().err


def _no_work(*_args, **_kwargs):
    raise AssertionError("an environment was built before every input was checked")


def test_the_probe_drives_the_installed_agentscope():
    found = probe()
    assert found["drivable"], found["missed"]
    assert found["version"] == agentscope_under_test.version()
    assert found["path"] == agentscope_under_test.path()


def test_a_bad_command_line_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["gate", "--profile", "nonsense"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_bare_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: hitl-harness" in capsys.readouterr().out


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("hitl-harness ")


@pytest.mark.parametrize("argv", [
    ["gate", "2.0.11", "--workers", "-3"],
    ["gate", "2.0.11", "--workers", "many"],
    ["gate", "2.0.11", "--budget", "0"],  # minutes above 0
    ["gate", "2.0.11", "--budget", "soon"],
])
def test_bad_options_are_usage_errors_before_any_work(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert "error:" in capsys.readouterr().err

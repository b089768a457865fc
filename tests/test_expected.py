"""``hitl-harness expect``: a property suite run held to its expected
verdicts (what ``.ci/run`` checks on the pinned release)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.tools import expected
from harness.tools.gate import known as known_list
from harness.world import agentscope_under_test
from harness.world.deployment import Deployment
from properties.catalog import PROPERTIES

KNOWN_PATH = expected.FINDINGS / "known.json"
KNOWN = known_list.load(KNOWN_PATH)


def _run() -> dict[str, dict]:
    """A run as the plugin's --hitl-verdicts-json gives it: I1 violated (F1 on
    2.0.8) with I2 found on the way, every other property holding."""
    verdicts = {p.code: {"verdict": "holds", "also_found": {}, "title": p.slug,
                         "windows": {w: 1 for w in p.windows}} for p in PROPERTIES}
    verdicts["I1"].update(verdict="VIOLATED", also_found={"I2": "counterexamples/I2-x"})
    return verdicts


def _changes(run: dict, expectation: dict, version: str = "2.0.8") -> dict[str, list[str]]:
    lines = expected.compare(run, expectation, KNOWN, version)
    assert [line.code for line in lines][: len(PROPERTIES)] == [p.code for p in PROPERTIES]
    return {line.code: line.changes for line in lines if line.changes}


def test_a_run_matches_the_expectation_it_records():
    run = _run()
    assert _changes(run, expected.record(run, "2.0.8")) == {}


def test_a_violation_no_longer_found_turns_its_line_red():
    expectation = expected.record(_run(), "2.0.8")
    run = _run()
    run["I1"].update(verdict="holds", also_found={})
    changes = _changes(run, expectation)
    assert list(changes) == ["I1"]
    assert changes["I1"] == ["expected VIOLATED", "no longer found on the way: I2"]
    line = next(line for line in expected.compare(run, expectation, KNOWN, "2.0.8") if line.code == "I1")
    assert "recorded I2" in line.render()


def test_a_finding_met_on_the_way_that_is_gone_turns_its_line_red():
    recorded = _run()
    recorded["I3"]["also_found"] = {"I1": "counterexamples/I1-y"}
    run = _run()  # I3's search no longer meets I1
    assert _changes(run, expected.record(recorded, "2.0.8")) == {"I3": ["no longer found on the way: I1"]}


def test_a_search_that_broke_with_no_story_is_an_error_never_a_violation():
    run = _run()
    expectation = expected.record(run, "2.0.8")
    run["I1"].update(verdict="ERROR", actual="FailedHealthCheck: ...", also_found={})
    changes = _changes(run, expectation)
    assert "the search broke with no story: FailedHealthCheck: ..." in changes["I1"]
    line = next(line for line in expected.compare(run, expectation, KNOWN, "2.0.8") if line.code == "I1")
    assert "(F1)" not in line.render()  # an error is no known finding


def test_a_window_no_longer_reached_turns_its_line_red():
    expectation = expected.record(_run(), "2.0.8")
    run = _run()
    run["I9"]["windows"]["stop-while-card-shows"] = 0
    assert _changes(run, expectation) == {"I9": ["no longer reached: stop-while-card-shows"]}
    newly = copy.deepcopy(expectation)
    newly["verdicts"]["I9"]["reached"].remove("stop-while-card-shows")
    assert _changes(_run(), newly) == {}  # reaching more is no change


def test_every_violation_must_be_a_known_finding_even_when_expected():
    run = _run()
    run["I6"].update(verdict="VIOLATED")  # nothing known says I6 breaks
    changes = _changes(run, expected.record(run, "2.0.8"))
    assert changes == {"I6": ["I6 found by I6's search is no known finding"]}
    # F1 is known on 2.0.8 only up to 2.0.9: on 2.0.9 the same run is red
    assert set(_changes(_run(), expected.record(_run(), "2.0.9"), "2.0.9")) == {"I1"}


def test_a_property_without_a_verdict_or_an_expectation_is_red():
    expectation = expected.record(_run(), "2.0.8")
    run = _run()
    del run["I15"]
    del expectation["verdicts"]["I3"]
    changes = _changes(run, expectation)
    assert changes == {"I3": ["the expected verdicts have none for it"],
                       "I15": ["the suite gave no verdict"]}


def test_the_committed_expectation_is_the_pinned_release_and_every_violation_in_it_is_known():
    data = expected.load(expected.default_path("2.0.8"))
    assert data["agentscope"] == "2.0.8" and data["profile"] == "ci"
    assert set(data["verdicts"]) == {p.code for p in PROPERTIES}
    for code, entry in data["verdicts"].items():
        searches = [code] if entry["verdict"] != "holds" else []
        for violated, by in [(code, searches), *((other, [code]) for other in entry["also_found"])]:
            if by:
                _, uncovered = known_list.findings(KNOWN, violated, by, "2.0.8")
                assert not uncovered, f"{violated} found by {code}'s search is no known finding"


def test_the_command_compares_a_saved_run_and_exits_1_on_a_change(tmp_path, capsys):
    run = _run()
    saved = tmp_path / "verdicts.json"
    saved.write_text(json.dumps({"agentscope_version": "2.0.8", "verdicts": run}), encoding="utf-8")
    expectation = tmp_path / "expected.json"
    assert expected.expect(expectation, known_path=expected.FINDINGS / "known.json",
                           verdicts_json=saved, write=True) == 0
    assert expected.expect(expectation, known_path=expected.FINDINGS / "known.json",
                           verdicts_json=saved) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith(expected.EXPECT_LINE) for line in out.splitlines()) == len(PROPERTIES)
    run["I4"]["verdict"] = "VIOLATED"
    saved.write_text(json.dumps({"agentscope_version": "2.0.8", "verdicts": run}), encoding="utf-8")
    assert expected.expect(expectation, known_path=expected.FINDINGS / "known.json",
                           verdicts_json=saved) == 1
    assert "1 changed: I4" in capsys.readouterr().out


def test_an_expectation_for_some_properties_on_redis_names_them_and_holds_only_them():
    seeds = ("I1", "I2", "I3", "I4", "I5", "I6", "I7")
    run = {code: entry for code, entry in _run().items() if code in seeds}
    expectation = expected.record(run, "2.0.8", deployment=("--hitl-bus", "redis", "--hitl-nodes", "2"),
                                  properties=seeds)
    assert expectation["deployment"] == ["--hitl-bus", "redis", "--hitl-nodes", "2"]
    assert expectation["properties"] == list(seeds)
    lines = expected.compare(run, expectation, KNOWN, "2.0.8")
    assert [line.code for line in lines] == list(seeds) and all(line.ok for line in lines)
    run.pop("I7")
    assert [line.code for line in expected.compare(run, expectation, KNOWN, "2.0.8")
            if not line.ok] == ["I7"]
    assert expected._selecting(seeds) == ("-k", "I1- or I2- or I3- or I4- or I5- or I6- or I7-")


def test_recording_again_keeps_the_files_properties_and_deployment(tmp_path):
    seeds = ("I1", "I2")
    run = {code: entry for code, entry in _run().items() if code in seeds}
    saved = tmp_path / "verdicts.json"
    saved.write_text(json.dumps({"agentscope_version": "2.0.8", "verdicts": run}), encoding="utf-8")
    expectation = tmp_path / "expected.json"
    expectation.write_text(json.dumps(expected.record(
        run, "2.0.8", deployment=("--hitl-bus", "redis", "--hitl-nodes", "2"), properties=seeds,
    )), encoding="utf-8")
    assert expected.expect(expectation, known_path=expected.FINDINGS / "known.json",
                           verdicts_json=saved, write=True) == 0
    again = json.loads(expectation.read_text(encoding="utf-8"))
    assert again["deployment"] == ["--hitl-bus", "redis", "--hitl-nodes", "2"]
    assert again["properties"] == list(seeds)


def _expectation(tmp_path, run: dict, deployment: tuple[str, ...] = ()) -> Path:
    """An expectation of ``run``'s properties, on ``deployment``."""
    path = tmp_path / "expected.json"
    path.write_text(json.dumps(expected.record(run, "2.0.8", deployment=deployment,
                                               properties=tuple(run))), encoding="utf-8")
    return path


def _saved(tmp_path, run: dict, deployment: dict | None) -> Path:
    saved = tmp_path / "verdicts.json"
    data = {"agentscope_version": "2.0.8", "verdicts": run}
    saved.write_text(json.dumps(data if deployment is None else {**data, "deployment": deployment}),
                     encoding="utf-8")
    return saved


def test_a_saved_run_is_recorded_with_the_deployment_it_was_searched_on(tmp_path):
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    saved = _saved(tmp_path, run, {"bus": "redis", "nodes": 3})
    expectation = tmp_path / "expected.json"
    assert expected.expect(expectation, known_path=KNOWN_PATH, verdicts_json=saved, write=True,
                           properties=("I1", "I2")) == 0
    assert json.loads(expectation.read_text(encoding="utf-8"))["deployment"] == [
        "--hitl-bus", "redis", "--hitl-nodes", "3"]
    assert expected.expect(expectation, known_path=KNOWN_PATH, verdicts_json=saved) == 0


@pytest.mark.parametrize("other", [{"bus": "fake", "nodes": 1}, {"bus": "redis", "nodes": 2}])
@pytest.mark.parametrize("write", [False, True], ids=["compared", "recorded"])
def test_a_saved_run_from_another_deployment_is_refused(tmp_path, capsys, other, write):
    """Compared with, or recorded into, an expectation of redis with 3
    nodes, a run searched on another deployment is an error (exit 2), and
    the file is left as it was."""
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    expectation = _expectation(tmp_path, run, ("--hitl-bus", "redis", "--hitl-nodes", "3"))
    before = expectation.read_text(encoding="utf-8")
    saved = _saved(tmp_path, run, other)
    assert expected.expect(expectation, known_path=KNOWN_PATH, verdicts_json=saved, write=write) == 2
    err = capsys.readouterr().err
    assert f"was searched on {Deployment(**other)}" in err and "is of redis bus, 3 node(s)" in err
    assert expectation.read_text(encoding="utf-8") == before


def test_the_command_lines_deployment_must_agree_with_the_files(tmp_path, capsys):
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    expectation = _expectation(tmp_path, run)
    saved = _saved(tmp_path, run, None)
    assert expected.expect(expectation, known_path=KNOWN_PATH, verdicts_json=saved,
                           deployment=("--hitl-bus", "redis")) == 2
    err = capsys.readouterr().err
    assert "the command line asks for redis bus, 2 node(s)" in err and "is of fake bus" in err


def test_a_saved_run_that_does_not_say_its_deployment_is_taken_with_a_note(tmp_path, capsys):
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    expectation = _expectation(tmp_path, run)
    assert expected.expect(expectation, known_path=KNOWN_PATH,
                           verdicts_json=_saved(tmp_path, run, None)) == 0
    assert "does not say which deployment it was searched on" in capsys.readouterr().err


@pytest.mark.parametrize("deployment", [{"bus": "redis", "nodes": "3"}, {"bus": "redis", "nodes": True},
                                        {"bus": "redis"}, {"bus": "pigeon", "nodes": 1}])
def test_a_malformed_deployment_in_a_saved_run_is_an_error(tmp_path, capsys, deployment):
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    expectation = _expectation(tmp_path, run)
    assert expected.expect(expectation, known_path=KNOWN_PATH,
                           verdicts_json=_saved(tmp_path, run, deployment)) == 2
    assert '"deployment" is ' in capsys.readouterr().err


def test_recording_without_a_file_keeps_the_default_files_settings(tmp_path, monkeypatch):
    """``expect --write`` with no FILE records the release's default file,
    keeping the properties and deployment it names."""
    monkeypatch.setattr(expected, "FINDINGS", tmp_path)
    seeds = ("I1", "I2")
    run = {code: entry for code, entry in _run().items() if code in seeds}
    version = agentscope_under_test.version()
    default = expected.default_path(version)
    default.write_text(json.dumps(expected.record(
        run, version, deployment=("--hitl-bus", "redis", "--hitl-nodes", "2"), properties=seeds,
    )), encoding="utf-8")
    saved = tmp_path / "verdicts.json"
    saved.write_text(json.dumps({"agentscope_version": version, "verdicts": run}), encoding="utf-8")
    assert expected.expect(None, known_path=KNOWN_PATH, write=True, verdicts_json=saved) == 0
    again = json.loads(default.read_text(encoding="utf-8"))
    assert again["deployment"] == ["--hitl-bus", "redis", "--hitl-nodes", "2"]
    assert again["properties"] == list(seeds)


@pytest.mark.parametrize("deployment", ["redis", ["--hitl-bus", "redis", "--hitl-nodes", "²"],
                                        ["--hitl-bus", "redis", "--hitl-nodes", "-1"], ["--hitl-nodes", 2]])
def test_a_malformed_deployment_in_an_expectation_is_an_error(tmp_path, capsys, deployment):
    run = {code: entry for code, entry in _run().items() if code in ("I1", "I2")}
    expectation = _expectation(tmp_path, run)
    written = json.loads(expectation.read_text(encoding="utf-8"))
    expectation.write_text(json.dumps({**written, "deployment": deployment}), encoding="utf-8")
    assert expected.expect(expectation, known_path=KNOWN_PATH,
                           verdicts_json=_saved(tmp_path, run, {"bus": "fake", "nodes": 1})) == 2
    assert "hitl-harness expect: error:" in capsys.readouterr().err


def test_a_deployment_record_reads_back_as_itself():
    for deployment in (Deployment(), Deployment("redis", 2), Deployment("redis", 3)):
        assert Deployment.from_record(deployment.record()) == deployment
        assert Deployment.from_options(deployment.options()) == deployment

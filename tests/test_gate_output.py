"""What the gate writes, without running a suite: the table (a legend,
within 100 columns), the JSON (a schema version; per property its verdict,
time, classification, folder, expected and actual), the JUnit XML (one case
per property per release, in catalog order, each with its own time), and
the merge of several saved gates (the shards of one)."""
from __future__ import annotations

import importlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.tools.cli import main
from harness.tools.gate import compare, specs
from harness.tools.gate.junit import write_junit
from harness.tools.gate.outcomes import JSON_SCHEMA, Exit, Row, exit_code
from harness.tools.gate.reports import render, write_json
from harness.tools.gate.shards import BadShard, Shard, parse
from harness.tools.gate.table import LEGEND, WIDTH, table
from properties.catalog import PROPERTIES

from gate_runs import go_offline, made_up_row, made_up_run
CODES = [record.code for record in PROPERTIES]


def _verdicts(version: str) -> dict:
    """Every property: I1 and I8 violated on 2.0.8, I8 on the others; I6's
    search meets I13; each search took its own (made-up) time."""
    verdicts = {}
    for n, code in enumerate(CODES, 1):
        violated = code == "I8" or (code == "I1" and version == "2.0.8")
        verdicts[code] = {
            "title": f"title-of-{code.lower()}",
            "verdict": "VIOLATED" if violated else "holds",
            "seconds": 10.0 + n,
            "counterexample": f"counterexamples/{code}-{version}" if violated else None,
            "expected": f"{code} expected on {version}" if violated else None,
            "actual": f"{code} happened on {version}" if violated else None,
            "also_found": {"I13": f"counterexamples/I13-{version}"} if code == "I6" else {},
            "also_found_says": ({"I13": {"expected": "the dispatcher survives",
                                          "actual": "it stopped"}} if code == "I6" else {}),
            "windows": {},
        }
    return verdicts


RAN: list[str] = []

_fake_row = made_up_row(_verdicts, RAN, suite_seconds=200.0)
_fake_run = made_up_run(_fake_row)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    go_offline(monkeypatch, _fake_run)
    RAN.clear()


def _compared() -> list[Row]:
    """2.0.9 and a checkout with a long path, against the baseline 2.0.8,
    and a SPEC that could not run."""
    base = _fake_row(specs.resolve("2.0.8")[0])
    base.role, base.new = "baseline", []
    rows = [base]
    for name in ("2.0.9", "/home/someone/src/agentscope-with-a-long-branch-name"):
        row = _fake_row(specs.resolve("2.0.9")[0])
        row.name = name
        compare.classify(row, base, [])
        rows.append(row)
    rows.append(Row(name="2.0.12", fix="on (I1,I2,I13,I14)").could_not_run(
        Exit.INSTALL_FAILED, "No solution found when resolving dependencies: " + "x" * 40))
    return rows


# ── the table ─────────────────────────────────────────────────────────


def test_every_line_the_gate_prints_fits_100_columns():
    rows = _compared()
    text = render(rows, exit_code(rows), profile="ci", with_fix=True)
    assert WIDTH == 100
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_wide == []
    head = text.splitlines()[text.splitlines().index(table(rows).splitlines()[0])]
    assert head.split() == ["SPEC", "fix", *CODES]  # every property has its column


def test_the_table_has_a_legend_and_one_mark_per_verdict():
    rows = _compared()
    lines = table(rows).splitlines()
    assert lines[1].split()[:3] == ["2.0.8", "(baseline)", "off"]
    assert lines[1].split()[3:] == [  # on the baseline a violation does not fail
        "x" if c in ("I1", "I8", "I13") else ".+" if c == "I6" else "." for c in CODES]
    assert lines[2].split()[:2] == ["2.0.9", "off"]
    nine = lines[2].split()[2:]
    assert nine[CODES.index("I8")] == "x"  # still violated: shown, does not fail
    assert nine[CODES.index("I1")] == "."  # fixed
    assert nine[CODES.index("I13")] == "x"  # still found on the way, by I6's search
    assert lines[3].startswith("…") and "branch-name (2.0.9)" in lines[3]  # a long SPEC keeps its end
    assert "could not run (install failed)" in lines[4]
    assert LEGEND in "\n".join(lines)
    for mark in (". holds", "X VIOLATED, fails the gate", "x VIOLATED, known",
                 "! its search broke", "+ its search also found"):
        assert mark in LEGEND
    assert "2.0.9: I8 VIOLATED -> counterexamples/I8-2.0.9" in lines


def test_a_violation_that_fails_the_gate_is_a_capital_x():
    row = _fake_row(specs.resolve("2.0.8")[0])
    compare.classify(row, None, [])  # no baseline: every violation fails
    marks = table([row]).splitlines()[1].split()[2:]
    assert marks[CODES.index("I1")] == "X" and marks[CODES.index("I8")] == "X"
    assert marks[CODES.index("I13")] == "X"  # found by I6's search (I6 is marked ".+")
    assert marks[CODES.index("I6")] == ".+"


# ── JSON ──────────────────────────────────────────────────────────────


def test_the_json_has_a_schema_and_every_property_says_all_it_knows(tmp_path):
    rows = _compared()
    write_json(rows, tmp_path / "v.json", exit_code(rows), profile="ci", with_fix=False)
    data = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert data["schema"] == JSON_SCHEMA == 2
    assert (data["profile"], data["with_fix"]) == ("ci", False)
    base, nine = data["specs"][0], data["specs"][1]
    assert list(nine["verdicts"]) == CODES  # catalog order, not I1, I10, I11, ...
    i8 = nine["verdicts"]["I8"]
    assert {k: i8[k] for k in ("verdict", "seconds", "classification", "counterexample",
                               "expected", "actual")} == {
        "verdict": "VIOLATED", "seconds": 18.0, "classification": "still violated",
        "counterexample": "counterexamples/I8-2.0.9",
        "expected": "I8 expected on 2.0.9", "actual": "I8 happened on 2.0.9"}
    assert nine["verdicts"]["I1"]["classification"] == "fixed"
    assert base["verdicts"]["I1"]["classification"] is None  # the baseline is not classified
    assert compare.load_rows(tmp_path / "v.json")[1].comparison["I1"]["classification"] == "fixed"


def test_a_newer_json_is_refused_not_misread(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"schema": 99, "specs": []}), encoding="utf-8")
    with pytest.raises(compare.BadBaseline, match="gate JSON version 99"):
        compare.load_rows(path)


# ── JUnit ─────────────────────────────────────────────────────────────


def test_junit_has_one_timed_case_per_property_in_catalog_order(tmp_path):
    rows = _compared()
    write_junit(rows, tmp_path / "v.xml")
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    nine = suites[1]
    cases = nine.findall("testcase")
    assert [c.get("name").split()[0] for c in cases] == CODES
    assert [c.get("time") for c in cases] == [f"{10.0 + n:.2f}" for n in range(1, len(CODES) + 1)]
    assert nine.get("time") == "200.0"
    assert suites[-1].find("testcase/error") is not None  # could not run


def test_a_failing_case_says_expected_actual_and_the_folder(tmp_path):
    row = _fake_row(specs.resolve("2.0.8")[0])
    compare.classify(row, None, [])
    write_junit([row], tmp_path / "v.xml")
    suite = ET.parse(tmp_path / "v.xml").getroot().find("testsuite")
    failure = suite.find("testcase[@name='I1 title-of-i1']/failure")
    assert failure.get("message") == (
        "I1 VIOLATED: expected I1 expected on 2.0.8; actual I1 happened on 2.0.8")
    assert failure.text.splitlines() == [
        "expected: I1 expected on 2.0.8", "actual:   I1 happened on 2.0.8",
        "counterexample: counterexamples/I1-2.0.8",
        "replay: hitl-harness replay counterexamples/I1-2.0.8"]
    on_the_way = suite.find("testcase[@name='I13 found on the way']/failure")
    assert on_the_way.get("message") == ("I13 newly found on the way by I6: expected the "
                                         "dispatcher survives; actual it stopped")
    assert "counterexample: counterexamples/I13-2.0.8" in on_the_way.text
    assert suite.get("failures") == "3"  # I1, I8, and I13 through I6's search


# ── shards and merge ──────────────────────────────────────────────────


@pytest.mark.parametrize(("text", "says"), [
    ("x", "is not a shard"), ("0/3", "must be 1 to 3"), ("4/3", "must be 1 to 3"),
    ("1/0", "number of shards"),
])
def test_a_bad_shard_is_refused(text, says):
    with pytest.raises(BadShard, match=says):
        parse(text)


def test_shards_split_the_releases_each_to_exactly_one():
    targets = specs.resolve_all([">=2.0.7", "latest"])
    shares = [Shard(i, 3).share(targets) for i in (1, 2, 3)]
    assert [[t.name.split()[0] for t in share] for share in shares] == [
        ["2.0.7", "2.0.10"], ["2.0.8", "2.0.11"], ["2.0.9", "2.0.11"]]
    assert sorted(t.name for share in shares for t in share) == sorted(t.name for t in targets)


@pytest.mark.parametrize("argv", [["--shard", "0/2"], ["--shard", "2"], ["--shard", "3/2"]])
def test_a_bad_shard_is_a_usage_error_before_any_work(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(["gate", "2.0.9", *argv])
    assert done.value.code == 2
    assert "--shard" in capsys.readouterr().err
    assert RAN == []


def _shards(tmp_path: Path, count: int, *extra: str) -> list[Path]:
    saved = []
    for i in range(1, count + 1):
        path = tmp_path / f"shard-{i}.json"
        main(["gate", ">=2.0.9", "--baseline", "2.0.8", "--shard", f"{i}/{count}",
              "--json", str(path), *extra])
        saved.append(path)
    return saved


def test_merged_shards_are_the_gate_they_split(tmp_path, capsys):
    whole = tmp_path / "whole.json"
    code = main(["gate", ">=2.0.9", "--baseline", "2.0.8", "--json", str(whole)])
    assert RAN == ["2.0.8", "2.0.9", "2.0.10", "2.0.11"]
    RAN.clear()
    shards = _shards(tmp_path, 2)
    assert RAN == ["2.0.8", "2.0.9", "2.0.11", "2.0.8", "2.0.10"]  # the baseline in each
    capsys.readouterr()
    merged = tmp_path / "merged.json"
    assert main(["merge", *map(str, shards), "--json", str(merged),
                 "--junit", str(tmp_path / "m.xml")]) == code == Exit.HOLDS
    out = capsys.readouterr().out
    assert out.startswith("hitl-harness merge (profile ci; reference fix off)")
    assert out.count("2.0.8 (baseline)  off") == 1
    names = [s["name"] for s in json.loads(merged.read_text(encoding="utf-8"))["specs"]]
    assert names == ["2.0.8", "2.0.9 (>=2.0.9)", "2.0.11 (>=2.0.9)", "2.0.10 (>=2.0.9)"]
    suites = ET.parse(tmp_path / "m.xml").getroot().findall("testsuite")
    assert len(suites) == 4


def test_a_merge_ends_with_the_exit_code_of_what_it_merges(tmp_path, capsys):
    holds = tmp_path / "holds.json"
    main(["gate", "2.0.9", "--baseline", "2.0.8", "--json", str(holds)])
    new = tmp_path / "new.json"
    assert main(["gate", "2.0.8", "--baseline", "2.0.9", "--json", str(new)]) == Exit.VIOLATED
    capsys.readouterr()
    assert main(["merge", str(holds)]) == Exit.HOLDS
    assert main(["merge", str(holds), str(new)]) == Exit.VIOLATED  # I1 is new on 2.0.8
    assert "exit 1: a property is newly VIOLATED" in capsys.readouterr().out


@pytest.mark.parametrize(("files", "says"), [
    (lambda s: s[:1] + s[2:], "shard 2/3 missing"),
    (lambda s: [s[0], s[0]], "shard 1/3 is in both"),
    (lambda s: [s[0], s[0].parent / "nothing.json"], "No such file or directory"),
])
def test_files_that_cannot_form_one_gate_are_refused(tmp_path, capsys, files, says):
    shards = _shards(tmp_path, 3)
    capsys.readouterr()
    assert main(["merge", *map(str, files(shards))]) == Exit.USAGE
    captured = capsys.readouterr()
    assert says in captured.err and captured.err.count("\n") == 1
    assert captured.out == ""


def test_a_spec_gated_twice_or_differently_is_refused(tmp_path, capsys):
    one, two = tmp_path / "a.json", tmp_path / "b.json"
    main(["gate", "2.0.9", "--json", str(one)])
    main(["gate", "2.0.9", "2.0.10", "--json", str(two)])
    dev = tmp_path / "dev.json"
    main(["gate", "2.0.11", "--profile", "dev", "--json", str(dev)])
    capsys.readouterr()
    assert main(["merge", str(one), str(two)]) == Exit.USAGE
    assert "2.0.9 is gated in both" in capsys.readouterr().err
    assert main(["merge", str(one), str(dev)]) == Exit.USAGE
    assert "different profile settings (ci, dev)" in capsys.readouterr().err


def test_folders_under_the_working_directory_are_shown_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdict = {"verdict": "holds", "counterexample": None,
               "also_found": {"I1": str(tmp_path / "cx" / "I1-a"), "I2": "/elsewhere/I2-b"}}
    shown = importlib.import_module("harness.tools.gate.gate")._relative(verdict)
    assert shown["also_found"] == {"I1": "cx/I1-a", "I2": "/elsewhere/I2-b"}
    assert shown["counterexample"] is None


def test_a_merge_keeps_a_suite_that_did_not_finish_and_each_pre_gate(tmp_path, capsys):
    other = tmp_path / "other.json"
    assert main(["gate", "2.0.11", "--baseline", "2.0.9", "--json", str(other)]) == Exit.HOLDS
    corpus = json.loads(other.read_text(encoding="utf-8"))["corpus"]
    late = Row("2.0.10", version="2.0.10").could_not_run(Exit.DID_NOT_FINISH,
                                                          "3 of 15 properties had verdicts")
    late.pregate = [{"folder": "I1-aaaa0000", "path": "cx/I1-aaaa0000", "found_on": "2.0.8",
                     "code": "I1", "status": "passes now", "why": "I1 holds through the story"}]
    saved = tmp_path / "late.json"
    write_json([late], saved, exit_code([late]), profile="ci", with_fix=False, corpus=corpus)
    capsys.readouterr()
    merged = tmp_path / "merged.json"
    code = main(["merge", str(other), str(saved), "--json", str(merged),
                 "--junit", str(tmp_path / "m.xml")])
    out = capsys.readouterr().out
    assert code == Exit.DID_NOT_FINISH == 7
    assert re.search(r"^2\.0\.10 +off  did not finish$", out, re.M)
    assert "2.0.10: did not finish: 3 of 15 properties had verdicts" in out
    assert f"pre-gate: the counterexamples of {corpus} replayed before any search" in out
    assert "2.0.10: 1 replayed: 1 passes now" in out
    assert out.rstrip().endswith("exit 7: a property suite did not finish within its budget")
    written = json.loads(merged.read_text(encoding="utf-8"))
    assert written["schema"] == JSON_SCHEMA and written["exit_code"] == 7
    assert [s["outcome"] for s in written["specs"]] == ["violated", "violated", "did_not_finish"]
    assert written["specs"][2]["pregate"] == late.pregate
    error = ET.parse(tmp_path / "m.xml").getroot().find("testsuite[3]/testcase/error")
    assert error.get("type") == "did_not_finish"


def test_the_help_lists_every_exit_code(capsys):
    listed = {}
    for command in ("gate", "merge"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        listed[command] = capsys.readouterr().out.split("exit codes", 1)[1]
    for code in Exit:
        assert f"\n  {int(code)}  " in listed["gate"], code
        if not 3 <= code <= 6:  # the merge names those together
            assert f"  {int(code)}  " in listed["merge"], code
    assert "\n  3-6  a SPEC could not run" in listed["merge"]
    assert "7  a property suite did not finish within its --budget" in listed["gate"]


def test_the_json_carries_no_path_of_this_machine(tmp_path, monkeypatch):
    """Where agentscope came from is said in words, and a replayed folder
    under the working directory is relative to it: the project commits its
    gate's JSON (docs/findings/gate-ci.json)."""
    monkeypatch.chdir(tmp_path)
    rows = _compared()
    installed = str(tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "agentscope")
    rows[0].path = installed
    folder = tmp_path / "docs" / "findings" / "counterexamples" / "I1-00000000"
    elsewhere = "/elsewhere/I1-11111111"
    rows[0].pregate = [{"folder": "I1-00000000", "path": str(folder)},
                       {"folder": "I1-11111111", "path": elsewhere}]
    write_json(rows, tmp_path / "v.json", exit_code(rows))
    text = (tmp_path / "v.json").read_text(encoding="utf-8")
    spec = json.loads(text)["specs"][0]
    assert spec["path"] == "an installed distribution"
    assert [e["path"] for e in spec["pregate"]] == ["docs/findings/counterexamples/I1-00000000", elsewhere]
    assert str(tmp_path) not in text

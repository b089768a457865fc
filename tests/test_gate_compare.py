"""Baselines and known violations, without running a suite: each candidate's
properties classified against a baseline (run, or read from saved verdicts)
and the known list, and the exit code that follows.

A real run takes minutes per release; here each release's verdicts are made
up (:data:`RESULTS`) and the gate's per-release step is replaced by one that
returns them.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.tools.cli import main
from harness.tools.gate import compare, specs
from harness.tools.gate.outcomes import Exit, Row

from gate_runs import gate_module, go_offline, made_up_row, made_up_run

ROOT = Path(__file__).resolve().parent.parent


def _v(verdict: str = "holds", *, cx: str | None = None, also: dict | None = None) -> dict:
    return {"title": "t", "verdict": verdict, "counterexample": cx, "also_found": also or {}}


#: Made-up verdicts per release: I1's search fails on 2.0.8 only, but I8's
#: search meets I1 on 2.0.9; I8 fails on both; I6's search finds I13 on
#: both; I9's search finds I5 on 2.0.9 only.
RESULTS = {
    "2.0.8": {"I1": _v("VIOLATED", cx="cx/I1-a"), "I5": _v(), "I6": _v(also={"I13": "cx/I13-b"}),
              "I8": _v("VIOLATED", cx="cx/I8-c"), "I9": _v()},
    "2.0.9": {"I1": _v(), "I5": _v(), "I6": _v(also={"I13": "cx/I13-d"}),
              "I8": _v("VIOLATED", cx="cx/I8-e", also={"I1": "cx/I1-g"}),
              "I9": _v(also={"I5": "cx/I5-f"})},
    "2.0.11": {"I1": _v(), "I5": _v(), "I6": _v(), "I8": _v(), "I9": _v()},
}

RAN: list[str] = []

_fake_row = made_up_row(RESULTS.__getitem__, RAN, suite_seconds=1.0)
_fake_run = made_up_run(_fake_row)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    go_offline(monkeypatch, _fake_run)
    RAN.clear()


def _row(version: str) -> Row:
    return _fake_row(specs.resolve(version)[0])


def _saved(tmp_path: Path, *versions: str) -> Path:
    """Verdicts saved by a gate of ``versions`` (``--json``)."""
    path = tmp_path / f"saved-{'-'.join(versions)}.json"
    assert gate_module.gate(list(versions), json_path=path) in (Exit.HOLDS, Exit.VIOLATED)
    RAN.clear()
    return path


# ── classification ────────────────────────────────────────────────────


def test_a_property_is_violated_by_its_own_search_or_another_one():
    assert compare.violations(_row("2.0.9")) == {
        "I1": ["I8"], "I5": ["I9"], "I8": ["I8"], "I13": ["I6"]}


def test_each_property_is_new_fixed_still_violated_or_holds_against_the_baseline():
    candidate, baseline = _row("2.0.9"), _row("2.0.8")
    compare.classify(candidate, baseline, [])
    kinds = {code: (e["classification"], e.get("on_the_way"))
             for code, e in candidate.comparison.items()}
    assert kinds == {"I1": ("fixed", "still"), "I5": ("holds", "new"), "I6": ("holds", None),
                     "I8": ("still violated", None), "I9": ("holds", None),
                     "I13": ("holds", "still")}
    assert candidate.baseline == "2.0.8"
    assert candidate.new == ["I5"]  # found on the way, by no search on the baseline
    assert candidate.comparison["I5"]["found_by"] == ["I9"]
    compare.classify(baseline, candidate, [])
    assert baseline.comparison["I1"]["classification"] == "new"
    assert baseline.comparison["I5"] == {"classification": "holds", "on_the_way": "gone"}
    assert baseline.new == ["I1"]


def test_with_no_baseline_every_violation_fails_unless_known():
    row = _row("2.0.8")
    compare.classify(row, None, [])
    assert row.new == ["I1", "I8", "I13"]
    assert {e["classification"] for e in row.comparison.values()} == {"violated", "holds"}


# ── the gate with a baseline ──────────────────────────────────────────


def test_a_baseline_read_from_saved_verdicts_classifies_the_candidate(tmp_path):
    saved = _saved(tmp_path, "2.0.8")
    out = tmp_path / "v.json"
    assert main(["gate", "2.0.11", "--baseline-json", str(saved), "--json", str(out)]) == 0
    assert RAN == ["2.0.11"]  # the baseline was read, not run
    data = json.loads(out.read_text(encoding="utf-8"))
    baseline, candidate = data["specs"]
    assert (baseline["role"], baseline["name"]) == ("baseline", "2.0.8")
    assert candidate["baseline"] == "2.0.8"
    assert candidate["comparison"]["I1"]["classification"] == "fixed"
    assert candidate["comparison"]["I13"] == {"classification": "holds", "on_the_way": "gone"}
    assert data["exit_code"] == 0


def test_a_fix_exits_0_and_a_regression_exits_1(tmp_path, capsys):
    both = _saved(tmp_path, "2.0.8", "2.0.9")
    out = tmp_path / "v.json"
    assert main(["gate", "2.0.9", "--baseline-json", str(both), "--baseline", "2.0.8",
                 "--known", str(ROOT / "docs/findings/known.json"), "--json", str(out)]) == 0
    comparison = json.loads(out.read_text(encoding="utf-8"))["specs"][1]["comparison"]
    assert comparison["I1"]["classification"] == "fixed"
    # I5, found by I9's search on 2.0.9 only, is new there, and known (F8)
    assert comparison["I5"] == {"classification": "holds", "on_the_way": "new",
                                "found_by": ["I9"], "known": ["F8"], "not_known": [],
                                "fails": False}
    text = capsys.readouterr().out
    assert "2.0.9 against the baseline 2.0.8:" in text
    assert "  fixed           I1 [still found on the way by I8; known F2]\n" in text
    assert "  on the way      I5 [newly found on the way by I9; known F8]" in text
    assert text.rstrip().endswith("exit 0: nothing new is VIOLATED (the violations shown "
                                  "are known or were on the baseline)")

    assert main(["gate", "2.0.8", "--baseline-json", str(both), "--baseline", "v2.0.9",
                 "--json", str(out)]) == 1
    comparison = json.loads(out.read_text(encoding="utf-8"))["specs"][1]["comparison"]
    assert comparison["I1"]["classification"] == "new" and comparison["I1"]["fails"]
    assert "NEW             I1" in capsys.readouterr().out


def test_a_baseline_spec_is_run_first_and_once(tmp_path, capsys):
    junit = tmp_path / "v.xml"
    code = gate_module.gate(["2.0.8", "2.0.9"], baseline="2.0.8", junit_path=junit)
    assert RAN == ["2.0.8", "2.0.9"]  # the candidate 2.0.8 is the baseline's run
    assert code == Exit.VIOLATED  # I5 is new on 2.0.9
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "agentscope 2.0.8 (baseline)", "agentscope 2.0.8", "agentscope 2.0.9"]
    # violations that do not fail are skipped cases, not failures
    assert [(s.get("failures"), s.get("skipped")) for s in suites] == [
        ("0", "2"), ("0", "2"), ("1", "1")]
    message = suites[2].find("testcase[@name='I8 t']/skipped").get("message")
    assert message == "I8 still violated"
    failure = suites[2].find("testcase[@name='I5 found on the way']/failure")
    assert failure.get("message") == "I5 newly found on the way by I9"
    assert failure.text == ("I9's search:\ncounterexample: cx/I5-f\n"
                            "replay: hitl-harness replay cx/I5-f")
    row = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("2.0.9 "))
    marks = dict(zip(["SPEC", "fix", "I1", "I5", "I6", "I8", "I9", "I13"], row.split()))
    assert (marks["I5"], marks["I9"]) == ("X", ".+")  # I5 fails the gate, through I9's search


def test_a_baseline_that_could_not_run_keeps_its_exit_code(tmp_path, monkeypatch):
    async def broken(target, **_options):
        if target.version == "2.0.8":
            return Row(name="2.0.8").could_not_run(Exit.INSTALL_FAILED, "no wheel")
        return _fake_row(target)

    monkeypatch.setattr(gate_module, "_gate_one", broken)
    assert gate_module.gate(["2.0.11"], baseline="2.0.8") == Exit.INSTALL_FAILED


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: _saved(p, "2.0.8", "2.0.9"), "holds 2 SPECs (2.0.8, 2.0.9): name one with --baseline"),
    (lambda p: p / "missing.json", "No such file or directory"),
    (lambda p: (p / "x.json").write_text("{}") and p / "x.json", "not the JSON of a gate"),
])
def test_a_baseline_file_that_cannot_serve_is_a_usage_error(tmp_path, capsys, make, says):
    path = make(tmp_path)
    assert main(["gate", "2.0.11", "--baseline-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert RAN == []

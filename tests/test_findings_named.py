"""A violation is named as the finding it is, where it is found: in the
verdict line, the verdicts' summary and ``report.md``, from the known list,
for the deployment it was searched on."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.tools import findings, verdicts
from harness.tools.gate import known
from harness.world.deployment import Deployment

REDIS_2 = Deployment("redis", 2)
ROOT = Path(__file__).resolve().parent.parent


def test_a_known_violation_is_named_with_its_scripts_and_report():
    named = findings.named("I5", ["I9"], "2.0.8")
    assert named.finding == "F8" and named.title.startswith("A double stop in the turn tail")
    record = findings.record(named)
    assert "docs/findings/confirm/f8_double_stop_in_turn_tail.py" in record["confirmed_by"]
    assert record["upstream"] == ["docs/upstream/F8.md"]
    assert findings.label(record).startswith(" [F8: docs/findings/confirm/")
    assert findings.label(record, links=False) == " [F8]"  # found on the way: its report links
    line = verdicts.finding_line(record)
    assert line.startswith("finding F8 (A double stop") and "upstream report: docs/upstream/F8.md" in line


def test_an_unknown_violation_says_so_and_names_nothing():
    named = findings.named("I1", ["I1"], "2.0.11")  # F1 is fixed there: no entry covers it
    assert named.finding == ""
    assert findings.label(findings.record(named)) == " [no known finding]"
    assert "none that the harness's known list" in named.line(None)


def test_a_finding_listed_for_redis_does_not_cover_the_fake_bus(tmp_path):
    """F13 holds for two processes on one Redis: the same I1 violation on the
    fake bus from 2.0.9 on is no known finding, so it still fails a gate."""
    assert findings.named("I1", ["I1"], "2.0.11", REDIS_2).finding == "F13"
    assert findings.named("I1", ["I1"], "2.0.11", Deployment()).finding == ""
    listed = tmp_path / "known.json"
    listed.write_text(json.dumps({"known": [{
        "property": "I1", "releases": ">=2.0.9", "finding": "F13",
        "deployments": [{"bus": "redis", "nodes": 2}],
    }]}), encoding="utf-8")
    entries = known.load(listed)
    assert known.findings(entries, "I1", ["I1"], "2.0.11", REDIS_2) == (["F13"], [])
    assert known.findings(entries, "I1", ["I1"], "2.0.11", Deployment("redis", 3)) == ([], ["I1"])
    assert known.findings(entries, "I1", ["I1"], "2.0.11") == ([], ["I1"])


@pytest.mark.parametrize("deployments, says", [
    ([], "deployments is not a list of deployments"),
    ({"bus": "redis"}, "deployments is not a list of deployments"),
    ([{"bus": "fake", "nodes": 2}], "several nodes need the redis bus"),
    ([{"bus": "redis"}], 'not {"bus": "<name>", "nodes": <number>}'),
])
def test_a_bad_deployment_in_the_known_list_is_one_line(tmp_path, deployments, says):
    listed = tmp_path / "known.json"
    listed.write_text(json.dumps({"known": [{
        "property": "I1", "releases": ">=2.0.9", "finding": "F13", "deployments": deployments,
    }]}), encoding="utf-8")
    with pytest.raises(known.BadList, match="entry 1: .*" + says.replace("(", r"\(")[:20]):
        known.load(listed)


def test_a_report_links_its_finding_from_inside_the_repository_and_names_it_outside(tmp_path):
    named = findings.named("I8", ["I8"], "2.0.8")
    inside = ROOT / "docs" / "findings" / "counterexamples" / "I8-x"
    assert "[`f2_message_while_parked.py`](../../confirm/f2_message_while_parked.py)" in named.line(inside)
    outside = named.line(tmp_path / "I8-x")
    assert "`docs/findings/confirm/f2_message_while_parked.py` (in the harness's repository)" in outside

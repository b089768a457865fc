"""A counterexample's id names the program its story ran.

The id (``<property>-<8 hex>``, the folder's name) must change with
anything that changes what ran: the steps, the machine's options, the
deployment, the agentscope release, a checkout's source and the reference
fixes applied (by name, not only whether any was). The same inputs give
the same id, so a folder written again is the same story; a folder that
holds a different story is never overwritten.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.story import folder
from properties.story.playback import replay
from properties.story.record import Counterexample, Step
from reference_fix import parked_continuation

STORY = Counterexample(
    code="I1", title="a reply ends with ERROR", statement="", failure="I1 broken", trace="",
    events={},
    steps=[
        Step("user_sends_message", {"session": "leader", "model_turn": "calls GatedAction"}),
        Step("payload_arrives", {"source": "team member", "to": "leader"}),
        Step("everything_settles"),
    ],
    machine={"enforcing": ["I1"]},
    agentscope_version="2.0.8", agentscope_path="an installed distribution", reference_fix=False,
)


def test_the_same_inputs_give_the_same_id():
    again = Counterexample(**{**STORY.__dict__, "steps": list(STORY.steps)})
    assert again is not STORY and again.name == STORY.name
    # a run's record (the trace, the Hypothesis that drew it) names no program
    assert replace(STORY, trace="   1  other", hypothesis_version="9.9.9").name == STORY.name


@pytest.mark.parametrize("changed", [
    {"steps": STORY.steps[:2]},
    {"machine": {"enforcing": ["I1", "I2"]}},
    {"machine": {"enforcing": ["I1"], "bus": "redis", "nodes": 2}},
    {"agentscope_version": "2.0.11"},
    {"agentscope_source": "sha256:0123456789abcdef"},
    {"reference_fix": True, "fixes": ["parked-continuation"]},
], ids=["steps", "machine", "deployment", "release", "checkout-source", "fixes"])
def test_each_input_of_the_program_changes_the_id(changed):
    assert replace(STORY, **changed).short_id != STORY.short_id


def test_the_deployment_changes_the_id():
    two = replace(STORY, machine={"enforcing": ["I1"], "bus": "redis", "nodes": 2})
    three = replace(STORY, machine={"enforcing": ["I1"], "bus": "redis", "nodes": 3})
    assert len({STORY.short_id, two.short_id, three.short_id}) == 3


def test_which_fixes_were_applied_changes_the_id():
    one = replace(STORY, reference_fix=True, fixes=["parked-continuation"])
    two = replace(STORY, reference_fix=True, fixes=["parked-continuation", "stale-decisions"])
    assert one.short_id != two.short_id


def test_a_checkout_is_named_by_its_source(tmp_path):
    """Two checkouts of one version string with different code have
    different digests, hence different ids; an installed release has none."""
    package = tmp_path / "agentscope"
    (package / "app").mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "2.0.8"\n', encoding="utf-8")
    (package / "app" / "_chat.py").write_text("def run():\n    return 1\n", encoding="utf-8")
    (package / "notes.txt").write_text("not source", encoding="utf-8")
    before = agentscope_under_test.digest_of(package)
    (package / "notes.txt").write_text("still not source", encoding="utf-8")
    assert agentscope_under_test.digest_of(package) == before
    (package / "app" / "_chat.py").write_text("def run():\n    return 2\n", encoding="utf-8")
    after = agentscope_under_test.digest_of(package)
    assert before.startswith("sha256:") and after != before
    assert (replace(STORY, agentscope_path="a source checkout", agentscope_source=before).name
            != replace(STORY, agentscope_path="a source checkout", agentscope_source=after).name)
    assert agentscope_under_test.is_installed("/x/lib/python3.11/site-packages/agentscope")
    assert not agentscope_under_test.is_installed(str(package))


def test_the_agentscope_under_test_has_a_digest_only_as_a_checkout():
    digest = agentscope_under_test.source_digest()
    if agentscope_under_test.is_installed(agentscope_under_test.path()):
        assert digest == ""
    else:
        assert digest == agentscope_under_test.digest_of(
            __import__("pathlib").Path(agentscope_under_test.path()),
        )


def test_story_json_records_the_fixes_and_the_source(tmp_path):
    story = replace(STORY, reference_fix=True, fixes=["parked-continuation"],
                    agentscope_source="sha256:0123456789abcdef")
    written = folder.write(story, tmp_path)
    data = json.loads((written / "story.json").read_text(encoding="utf-8"))
    assert data["schema"] == 4
    assert data["fixes"] == ["parked-continuation"]
    assert data["agentscope_source"] == "sha256:0123456789abcdef"
    assert Counterexample.load(written) == story


def test_a_story_of_format_3_still_reads(tmp_path):
    written = folder.write(STORY, tmp_path)
    data = json.loads((written / "story.json").read_text(encoding="utf-8"))
    data["schema"] = 3
    del data["fixes"], data["agentscope_source"]
    (written / "story.json").write_text(json.dumps(data), encoding="utf-8")
    old = Counterexample.load(written)
    assert (old.fixes, old.agentscope_source, old.steps) == ([], "", STORY.steps)


def test_the_same_story_is_written_again_identically(tmp_path):
    first = folder.write(STORY, tmp_path)
    files = {p.name: p.read_bytes() for p in first.iterdir()}
    again = folder.write(replace(STORY, trace="   1  same story, another run"), tmp_path)
    assert again == first
    assert (again / "report.md").read_bytes() != files["report.md"]  # rewritten, not skipped


def test_a_different_story_is_never_written_over_a_folder(tmp_path):
    other = replace(STORY, steps=[Step("everything_settles")])
    # a folder of STORY's name holding another story (an older format's id)
    taken = tmp_path / STORY.name
    taken.mkdir()
    (taken / "story.json").write_text(other.to_json(), encoding="utf-8")
    with pytest.raises(folder.FolderTaken) as refused:
        folder.write(STORY, tmp_path)
    assert len(str(refused.value).splitlines()) == 1
    assert "holds a different story" in str(refused.value)
    assert Counterexample.load(taken) == other  # untouched
    (taken / "story.json").write_text("not json", encoding="utf-8")
    with pytest.raises(folder.FolderTaken):
        folder.write(STORY, tmp_path)


def test_the_plugin_says_in_one_line_that_it_kept_another_story(pytester, tmp_path):
    """A failing test's story whose folder holds another story: the run
    says so in one line and the other story stays."""
    story = replace(STORY, code="I9", machine={"enforcing": ["I9"]})
    found = folder.write(story, tmp_path / "stories")  # outside what the run collects
    pytester.makepyfile(test_story=f"""
        from properties.story.record import Counterexample

        def test_fails():
            error = AssertionError("I9 broken on purpose")
            error.counterexample = Counterexample.load({str(found)!r})
            raise error
        """)
    taken = pytester.path / "found" / story.name
    taken.mkdir(parents=True)
    (taken / "story.json").write_text(replace(story, steps=[]).to_json(), encoding="utf-8")
    result = pytester.runpytest(
        "--hitl-counterexamples", str(pytester.path / "found"),
        "-o", "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{story.name} holds a different story; not overwritten*"])
    assert json.loads((taken / "story.json").read_text(encoding="utf-8"))["steps"] == []


@pytest.mark.skipif(
    agentscope_under_test.version() not in parked_continuation.TARGET_RELEASES,
    reason="the story fails only on a release with the parked-inbox bug",
)
def test_a_found_story_names_the_fixes_in_effect_and_the_source():
    plain = replay(STORY).counterexample
    assert plain.fixes == [] and not plain.reference_fix
    assert plain.agentscope_source == agentscope_under_test.source_digest()
    outcome = reference_fix.apply()
    try:
        assert reference_fix.fixes_in_effect() == outcome.fixes
    finally:
        reference_fix.remove()
    # a fix that leaves this story failing: the story names it
    reference_fix.FIXES["dispatcher-survival"][0].apply()
    try:
        fixed = replay(STORY).counterexample
    finally:
        reference_fix.remove()
    assert fixed.fixes == ["dispatcher-survival"] and fixed.reference_fix
    assert fixed.short_id != plain.short_id

"""A failing story becomes a folder a person can attach to a bug report.

The story is the bug report's, as Hypothesis shrinks it on the full
machine. On a release with the bug it fails I1, and its folder must hold a
readable report, a standalone ``test_repro.py`` that fails the same way
(and passes with the reference fix), and a ``story.json`` that
``hitl-harness replay`` replays to the identical trace. On a release
without the bug the same story must hold. Either way a verdict is asserted.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
import sys

import pytest

import reference_fix
from reference_fix import parked_continuation
from harness.world import agentscope_under_test
from harness.tools.replay import PASSES, STILL_FAILS, replay_folder
from properties.story import folder
from properties.story.playback import replay
from properties.story.record import Counterexample, Step

BUGGY = agentscope_under_test.version() in parked_continuation.TARGET_RELEASES

REPORT_STORY = Counterexample(
    code="I1", title="", statement="", failure="", trace="", events={},
    steps=[
        Step("user_sends_message", {"session": "leader", "model_turn": "calls GatedAction"}),
        Step("payload_arrives", {"source": "team member", "to": "leader"}),
        Step("everything_settles"),
    ],
    machine={"enforcing": ["I1"]},
    agentscope_version="", agentscope_path="", reference_fix=False,
)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The report story played once; its folder if it failed."""
    failure = replay(REPORT_STORY)
    if failure is None:
        return None
    return folder.write(failure.counterexample, tmp_path_factory.mktemp("counterexamples"))


def test_the_report_story_fails_exactly_where_the_bug_is(written):
    assert (written is not None) == BUGGY


@pytest.mark.skipif(not BUGGY, reason="the story holds on this release (asserted above)")
class TestOnAReleaseWithTheBug:
    def test_the_folder_is_named_by_property_and_story(self, written):
        again = Counterexample.load(written)
        assert written.name == f"I1-{again.short_id}"
        assert sorted(p.name for p in written.iterdir()) == ["report.md", "story.json", "test_repro.py"]

    def test_the_report_reads_as_a_bug_report(self, written):
        report = (written / "report.md").read_text(encoding="utf-8")
        assert f"agentscope {agentscope_under_test.version()}" in report
        assert agentscope_under_test.path() not in report  # versions, never the finder's paths
        assert "imported from an installed distribution" in report
        assert "a reply ends with ERROR only when a rule injected a fault" in report
        assert "1. The user sends leader a message" in report
        assert "2. A team member delivers a message to leader's inbox" in report
        assert "3. Everything runs to its end" in report
        assert "expected: no reply of leader ends with ERROR" in report
        assert "REPLY_END finished_reason=error" in report  # the timeline shows it published
        assert "chat-run:leader" in report

    def test_the_repro_fails_standalone_and_passes_with_the_fix(self, written):
        def pytest_in_folder(*extra):
            return subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "test_repro.py", *extra],
                cwd=written, capture_output=True, text=True, check=False,
            )

        buggy = pytest_in_folder()
        assert buggy.returncode == 1, buggy.stdout[-2000:]
        assert "InvariantViolated" in buggy.stdout
        assert "I1 no ReplyEnd(ERROR)" in buggy.stdout
        # it writes nothing unless asked (no second folder beside it)
        assert sorted(p.name for p in written.iterdir()) == ["report.md", "story.json", "test_repro.py"]
        asked = pytest_in_folder("--hitl-counterexamples", "again")
        assert asked.returncode == 1 and "written to again/I1-" in asked.stdout
        assert [p.name.split("-")[0] for p in (written / "again").iterdir()] == ["I1"]
        shutil.rmtree(written / "again")
        fixed = pytest_in_folder("--hitl-reference-fix")
        assert fixed.returncode == 0, fixed.stdout[-2000:]

    def test_replay_agrees_and_the_trace_is_identical(self, written, capsys):
        assert replay_folder(written) == STILL_FAILS
        said = capsys.readouterr().out
        assert "still fails the same way: I1 at step 3 of 3" in said
        assert "trace: identical to the recorded one" in said
        try:
            assert replay_folder(written, with_fix=True) == PASSES
        finally:
            reference_fix.remove()
        assert "passes now" in capsys.readouterr().out


def test_replay_refuses_a_folder_that_is_not_a_counterexample(tmp_path, capsys):
    assert replay_folder(tmp_path) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("hitl-harness replay: error: ")
    assert "is not a counterexample folder" in said.err


def test_the_plugin_writes_the_folder_of_any_failing_story(pytester):
    """Under pytest, a failure carrying a story is written where
    ``--hitl-counterexamples`` says, and the report names the folder."""
    pytester.makepyfile(
        test_story="""
        from properties.story.record import Counterexample, Step

        def test_fails():
            error = AssertionError("I9 broken on purpose")
            error.counterexample = Counterexample(
                code="I9", title="broken on purpose", statement="never", failure="I9 broken",
                steps=[Step("everything_settles")], machine={"enforcing": ["I9"]},
                trace="   1  task  op  key", events={}, agentscope_version="0",
                agentscope_path="/nowhere", reference_fix=False,
            )
            raise error
        """,
    )
    result = pytester.runpytest(
        "--hitl-counterexamples", str(pytester.path / "found"),
        "-o", "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(failed=1)
    written = list((pytester.path / "found").iterdir())
    assert [p.name.split("-")[0] for p in written] == ["I9"]
    assert (written[0] / "test_repro.py").is_file()
    result.stdout.fnmatch_lines(["*hitl-harness counterexample*", "written to *found/I9-*"])


# ── the story format ──────────────────────────────────────────────────


def test_story_json_carries_its_schema_version_and_reads_back(tmp_path):
    import json

    from properties.story.record import SCHEMA

    folder.write(REPORT_STORY, tmp_path)
    written = tmp_path / REPORT_STORY.name
    data = json.loads((written / "story.json").read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA
    assert Counterexample.load(written) == REPORT_STORY


def test_a_story_from_before_the_version_reads_as_version_1(tmp_path):
    import json

    folder.write(REPORT_STORY, tmp_path)
    story = tmp_path / REPORT_STORY.name / "story.json"
    data = json.loads(story.read_text(encoding="utf-8"))
    del data["schema"]
    story.write_text(json.dumps(data), encoding="utf-8")
    assert Counterexample.load(story.parent).steps == REPORT_STORY.steps


def test_a_story_from_a_newer_harness_is_refused_not_misread(tmp_path, capsys):
    import json

    folder.write(REPORT_STORY, tmp_path)
    story = tmp_path / REPORT_STORY.name / "story.json"
    data = json.loads(story.read_text(encoding="utf-8"))
    data["schema"] = 99
    story.write_text(json.dumps(data), encoding="utf-8")
    assert replay_folder(story.parent) == 2
    assert "story format 99" in capsys.readouterr().err


def test_a_step_that_no_longer_applies_ends_or_stops_the_replay_loudly():
    from properties.rules.story_rule import StepDoesNotApply

    story = Counterexample(**{
        **REPORT_STORY.__dict__,
        "steps": [
            Step("user_sends_message", {"session": "leader", "model_turn": "answers"}),
            Step("everything_settles"),
            Step("run_continues", {"session": "leader"}),  # no run is left
        ],
    })
    from properties.story.playback import StoryEndedEarly

    # The rule exists but agentscope did not reach the state it needs (as on
    # a release that fixes the bug earlier in the story): the story ends
    # there, settled and checked, with a warning naming the step.
    with pytest.warns(StoryEndedEarly, match="step 3: rule run_continues does not apply: its precondition is false"):
        assert replay(story) is None
    unknown = Counterexample(**{**REPORT_STORY.__dict__, "steps": [Step("user_dances")]})
    assert str(replay(unknown)) == (
        "step 1: rule user_dances does not apply: no such rule on this story's machine"
    )
    wrong_turn = Counterexample(**{**REPORT_STORY.__dict__, "steps": [
        Step("user_sends_message", {"session": "solo", "model_turn": "sings"}),
    ]})
    assert "'sings' is not one of the machine's turns" in str(replay(wrong_turn))


def test_a_story_names_where_agentscope_came_from_never_its_path():
    from properties.story.environment import INSTALLED, where_agentscope_came_from

    assert where_agentscope_came_from("/x/lib/python3.11/site-packages/agentscope") == INSTALLED
    assert where_agentscope_came_from(INSTALLED) == INSTALLED  # a story read back says the same

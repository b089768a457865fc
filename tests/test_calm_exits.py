"""Every exit says why, in one line: the property suite's last line names
the reason for its exit code, Ctrl-C is one line and 130, ``replay``
refuses a wrong path before agentscope is imported and has its own code
for a story it cannot play, and every command's help lists its codes."""
from __future__ import annotations

import subprocess
import sys

import pytest

from harness.tools import exit_reason
from harness.tools.cli import main
from harness.tools.replay import CANNOT_PLAY, replay_folder
from properties.story import folder
from properties.story.record import Counterexample, Step

#: A story with a step no harness has (a rule it does not know).
UNKNOWN_STEP = Counterexample(
    code="I1", title="", statement="", failure="", trace="", events={},
    steps=[Step("user_dances")], machine={"enforcing": ["I1"]},
    agentscope_version="", agentscope_path="", reference_fix=False,
)


def _entry(verdict: str, counterexample=None, also=None) -> dict:
    return {"verdict": verdict, "counterexample": counterexample, "also_found": also or {}}


def test_the_last_line_says_why_a_run_that_passed_exits_1():
    verdicts = {"I6": _entry("holds", also={"I1": "cx/I1-a", "I13": "cx/I13-b"})}
    assert exit_reason.reason(1, verdicts, "2.0.8") == (
        "exit 1: no searched property violated; found on the way: "
        "I1 (F1) -> cx/I1-a, I13 (F4) -> cx/I13-b"
    )


def test_the_last_line_names_violations_errors_and_a_clean_run():
    verdicts = {"I1": _entry("VIOLATED", "cx/I1-a"), "I5": _entry("ERROR"), "I2": _entry("holds")}
    assert exit_reason.reason(1, verdicts, "2.0.8") == (
        "exit 1: violated: I1 (F1) -> cx/I1-a; search broke with no story (ERROR): I5"
    )
    assert exit_reason.reason(1, {"I1": _entry("VIOLATED", "cx/I1-a")}, "9.9.9") == (
        "exit 1: violated: I1 -> cx/I1-a"  # on no release the known list names
    )
    assert exit_reason.reason(0, {"I2": _entry("holds")}, "2.0.8") == (
        "exit 0: 1 searched property held and no search found another's violation"
    )
    assert exit_reason.reason(130, {"I2": _entry("holds")}, "2.0.8") == (
        "exit 130: interrupted (Ctrl-C); 1 properties had verdicts"
    )


def test_ctrl_c_under_pytest_is_one_line_and_130(pytester):
    pytester.makepyfile(test_stop="def test_stop():\n    raise KeyboardInterrupt\n")
    result = pytester.runpytest_subprocess(
        "--hitl-harness", "-p", "no:cacheprovider",
        "-o", "asyncio_default_fixture_loop_scope=function",
    )
    assert result.ret == 130
    lines = [line for line in result.outlines if line.strip()]
    assert lines[-1] == "exit 130: interrupted (Ctrl-C); 0 properties had verdicts"
    assert not [line for line in result.outlines if "full traceback on KeyboardInterrupt" in line]


def test_replay_refuses_a_wrong_path_before_importing_agentscope(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.tools.cli import main; "
         f"code = main(['replay', {str(tmp_path / 'nowhere')!r}]); "
         "print(code, 'agentscope' in sys.modules)"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr == (f"hitl-harness replay: error: {tmp_path / 'nowhere'} is not a "
                           "counterexample folder: no story.json there\n")


def test_a_story_replay_cannot_play_has_its_own_exit_code(tmp_path, capsys):
    written = folder.write(UNKNOWN_STEP, tmp_path)
    assert replay_folder(written) == CANNOT_PLAY == 3
    err = capsys.readouterr().err
    assert err.startswith("hitl-harness replay: error: cannot be replayed here: step 1: "
                          "rule user_dances does not apply")


@pytest.mark.parametrize("command", [[], ["gate"], ["merge"], ["replay"], ["expect"]])
def test_every_command_s_help_lists_its_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes" in text and "  0  " in text and "130  interrupted (Ctrl-C)" in text


def test_a_violation_comes_first_and_the_harness_s_frames_are_hidden(pytester):
    pytester.makepyfile(
        test_story="""
        from properties.story.record import Counterexample, Step

        def deep_inside_the_harness():
            error = AssertionError("I9 broken on purpose\\n  expected: this\\n  actual:   that")
            error.add_note("Bus operations up to the violation: none")
            error.counterexample = Counterexample(
                code="I9", title="broken on purpose", statement="never", failure="I9 broken",
                steps=[Step("everything_settles")], machine={"enforcing": ["I9"]},
                trace="   1  task  op  key", events={}, agentscope_version="0",
                agentscope_path="/nowhere", reference_fix=False,
            )
            raise error

        def test_fails():
            deep_inside_the_harness()
        """,
    )
    result = pytester.runpytest(
        "--hitl-counterexamples", str(pytester.path / "found"),
        "-o", "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(failed=1)
    out = result.outlines
    header = next(i for i, line in enumerate(out) if line.startswith("_") and "test_fails" in line)
    assert out[header + 1:header + 4] == [
        "I9 broken on purpose", "  expected: this", "  actual:   that"]
    assert not [line for line in out if "deep_inside_the_harness()" in line]
    result.stdout.fnmatch_lines(["*hitl-harness how it came about*",
                                 "Bus operations up to the violation: none"])
    # with --tb given, pytest's own traceback is kept
    again = pytester.runpytest("--hitl-counterexamples", str(pytester.path / "found"), "--tb=short",
                               "-o", "asyncio_default_fixture_loop_scope=function")
    assert [line for line in again.outlines if "deep_inside_the_harness()" in line]


def test_agentscope_s_own_error_is_said_to_be_agentscope_s():
    from properties.invariants.safety import no_error_reply_without_fault
    from properties.violation import Broken

    class View:
        alias = "solo"
        events = [{"type": "REPLY_END", "finished_reason": "error",
                   "error": {"type": "setup", "message": "The session could not be prepared"}}]

    class Obs:
        sessions = {"solo": View()}

    class Ledger:
        faults = set()

    with pytest.raises(Broken) as broken:
        no_error_reply_without_fault(Obs(), Ledger())
    assert broken.value.actual == (
        "1 ReplyEnd(ERROR) published for solo, carrying agentscope's own error: "
        'setup: "The session could not be prepared"'
    )

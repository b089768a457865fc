"""The publish-survives-stops fix (F11): the user messages leader, whose
model starts a long job, and presses stop twice. The first stop's cancel
cuts a publish short; re-armed, it meets every later publish of the reply
while the connection is made again, and the reply's closing events,
``REPLY_END(interrupted)`` among them, are dropped (I9, I10). With the fix
every one is published."""
from __future__ import annotations

import pytest

import reference_fix
from harness.world import agentscope_under_test
from reference_fix.diffs import combined_diff, diff_path
from tests.fix_checks import alone, violation

FIX = "publish-survives-stops"


def _double_stop_during_a_long_job(story) -> None:
    story.user_sends_message(session="leader", model_turn="starts a background job")
    story.user_interrupts(session="leader")
    story.user_interrupts(session="leader")


def _violation(code: str) -> str | None:
    return violation(
        _double_stop_during_a_long_job, enforcing=[code], background_jobs=True,
        cast=["leader", "solo"], interrupts=True, messaged=["leader"], sources=["channel"],
        turns=["starts a background job"],
    )


@pytest.fixture
def patches():
    yield from alone(FIX)


@pytest.mark.parametrize("code, says", [
    ("I9", "reply ends published after the interrupt: none"),
    ("I10", "leader"),
])
def test_a_double_stop_drops_the_reply_end_unless_fixed(patches, code, says):
    unfixed = _violation(code) or ""
    assert code in unfixed and says in unfixed
    for patch in patches:
        patch.apply()
    assert _violation(code) is None


def test_the_diff_is_the_runtime_change(patches):
    """The release's own diff (2.0.10 keeps the entry id as its checkpoint
    cursor: a variant of the loops' patch)."""
    shipped = diff_path(FIX, agentscope_under_test.version()).read_text(encoding="utf-8")
    assert combined_diff(patches) == shipped


def test_each_variant_refuses_what_it_was_not_written_for():
    for patch in reference_fix.FIXES[FIX]:
        with pytest.raises(reference_fix.FixRefused, match="this agentscope is 2.0.6"):
            patch.check_target("2.0.6", patch.before)
        with pytest.raises(reference_fix.FixRefused, match="does not contain the code"):
            patch.check_target(patch.targets[0], patch.before[: len(patch.before) // 2])

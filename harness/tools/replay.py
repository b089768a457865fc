"""``hitl-harness replay PATH``: does a counterexample still fail?

Replays the folder's story (``story.json``, the same steps as its
``test_repro.py``) against the agentscope ``import agentscope`` finds, and
says whether it fails the same way, fails differently, or passes now. On the
agentscope it was found on, the replayed trace must equal the recorded one
(stories are deterministic); the replay says so.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from harness.world import agentscope_under_test
from harness.world.quiet import silence_agentscope
from properties.rules.story_rule import StepDoesNotApply
from properties.story.playback import replay
from properties.story.record import Counterexample, UnreadableStory

#: Exit codes of ``replay``: it passes now; it still fails (the same way,
#: differently, or a step no longer applies); not a counterexample folder.
PASSES, STILL_FAILS, UNREADABLE = 0, 1, 2


def replay_folder(folder: Path, *, with_fix: bool = False) -> int:
    """Replay ``folder``; print what happened; return the exit code."""
    try:
        recorded = Counterexample.load(folder)
    except UnreadableStory as unreadable:
        print(f"{folder} is not a counterexample folder: {unreadable}")
        return UNREADABLE
    silence_agentscope()
    if with_fix:
        import reference_fix  # pylint: disable=import-outside-toplevel

        try:
            reference_fix.apply()
        except reference_fix.FixRefused as refused:
            print(f"--with-fix refused: {refused}")
            return UNREADABLE
    print(f"replaying {recorded.name} ({len(recorded.steps)} steps, found on agentscope "
          f"{recorded.agentscope_version}) on {agentscope_under_test.describe()}"
          + (" with the reference fix" if with_fix else ""))
    failure = replay(recorded)
    if isinstance(failure, StepDoesNotApply):
        print(f"cannot be replayed here: {failure}")
        return STILL_FAILS
    if failure is None:
        print(f"passes now: {recorded.code} holds through the whole story")
        return PASSES
    again = getattr(failure, "counterexample", None)
    if again is None or again.code != recorded.code:
        print(f"still fails, differently: {type(failure).__name__}: {failure}")
        return STILL_FAILS
    print(f"still fails the same way: {recorded.code} at step {len(again.steps)} "
          f"of {len(recorded.steps)}")
    print("  " + again.failure.strip().replace("\n", "\n  "))
    same_release = (
        again.agentscope_version == recorded.agentscope_version
        and again.reference_fix == recorded.reference_fix
    )
    if same_release:
        if again.trace == recorded.trace:
            print("trace: identical to the recorded one "
                  f"({len(again.trace.splitlines())} bus operations)")
        else:
            diff = difflib.unified_diff(
                recorded.trace.splitlines(), again.trace.splitlines(),
                "recorded", "replayed", lineterm="", n=1,
            )
            print("trace: DIFFERS from the recorded one (first lines of the diff):")
            print("\n".join(list(diff)[:20]))
    return STILL_FAILS

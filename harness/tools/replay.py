"""``hitl-harness replay PATH``: does a counterexample still fail?

Replays the folder's story (``story.json``, the same steps as its
``test_repro.py``) against the agentscope ``import agentscope`` finds, and
says whether it fails the same way, fails differently, or passes now. On the
agentscope it was found on, the replayed trace must equal the recorded one
(stories are deterministic); the replay says so.
"""
from __future__ import annotations

import difflib
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from harness.world import agentscope_under_test
from harness.world.quiet import silence_agentscope
from properties.rules.story_rule import StepDoesNotApply
from properties.story.playback import StoryEndedEarly, replay
from properties.story.record import Counterexample, UnreadableStory

from . import toolchain
from .gate.pregate import CANNOT, NOW_PASSES, STILL

#: Exit codes of ``replay``: it passes now; it still fails (the same way,
#: differently, or a step no longer applies); not a counterexample folder
#: (or ``--with-fix`` refused); a story this harness cannot play (a rule or
#: an argument it does not know: neither fails nor passes).
PASSES, STILL_FAILS, UNREADABLE, CANNOT_PLAY = 0, 1, 2, 3


def _error(message: str) -> None:
    print(f"hitl-harness replay: error: {message}", file=sys.stderr)

@dataclass
class Replayed:
    """One replay of a story: what it found (:data:`STILL`,
    :data:`NOW_PASSES` or :data:`CANNOT`) and why, in one line."""

    status: str
    why: str
    failure: BaseException | None = None

    @property
    def again(self) -> Counterexample | None:
        """The story the failure carries, if it broke the same property."""
        return getattr(self.failure, "counterexample", None)


def replay_story(recorded: Counterexample) -> Replayed:
    """Play ``recorded`` back and judge it. A story with a step this
    harness cannot play (a rule it does not have, an argument it does not
    know) cannot be replayed: it neither fails nor passes. A story that
    ends early because agentscope no longer reaches the state a step needs
    (as on a release that fixes the bug earlier in the story) is judged by
    how it ended, and says where it ended."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always", StoryEndedEarly)
        failure = replay(recorded)
    early = next((str(w.message) for w in heard if issubclass(w.category, StoryEndedEarly)), None)
    ended = f" ({early})" if early else ""
    if isinstance(failure, StepDoesNotApply):
        return Replayed(CANNOT, str(failure), failure)
    if failure is None:
        return Replayed(NOW_PASSES, f"{recorded.code} holds through the whole story"
                        if early is None else f"{recorded.code} holds{ended}")
    again = getattr(failure, "counterexample", None)
    if again is None or again.code != recorded.code:
        first = (str(failure).strip().splitlines() or [""])[0]
        return Replayed(STILL, f"differently: {type(failure).__name__}: {first}{ended}", failure)
    return Replayed(STILL, f"the same way: {recorded.code} at step {len(again.steps)} "
                           f"of {len(recorded.steps)}{ended}", failure)


def patch_note(recorded: dict, installed: dict, name: str) -> str | None:
    """One line when the story was recorded with another patch layer than
    the one installed now (or one and not the other): it then replays on
    another program than it was found on. None when they agree."""
    if recorded == installed:
        return None
    def said(layer: dict) -> str:
        return f"{layer.get('name')} ({layer.get('digest')})" if layer else "no patch layer"
    advice = (f"; replay it with --patch {recorded.get('name')} to play it as found"
              if recorded else "")
    return f"note: {name} was recorded with {said(recorded)}, this replay has {said(installed)}{advice}"


def replay_folder(folder: Path, *, with_fix: bool = False, patch: str | None = None) -> int:
    """Replay ``folder`` (with the user's ``patch`` layer installed, if
    any); print what happened; return the exit code."""
    try:
        recorded = Counterexample.load(folder)
    except UnreadableStory as unreadable:
        _error(f"{folder} is not a counterexample folder: {unreadable}")
        return UNREADABLE
    silence_agentscope()
    if with_fix:
        import reference_fix  # pylint: disable=import-outside-toplevel

        try:
            reference_fix.apply()
        except reference_fix.FixRefused as refused:
            _error(f"--with-fix refused: {refused}")
            return UNREADABLE
    if patch:
        from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

        try:
            patch_layer.install(patch)
        except patch_layer.PatchRefused as refused:
            _error(f"--patch {patch}: {refused}")
            return UNREADABLE
    # The folder's own name: an older format's id is not what this
    # harness would compute for it (the id now covers more).
    name = Path(folder).resolve().name
    note = toolchain.version_note(recorded.hypothesis_version, name)
    if note:
        print(note)
    from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

    layer = patch_layer.record()
    note = patch_note(recorded.patch, layer, name)
    if note:
        print(note)
    print(f"replaying {name} ({len(recorded.steps)} steps, found on agentscope "
          f"{recorded.agentscope_version}) on {agentscope_under_test.describe()}"
          + (" with the reference fix" if with_fix else "")
          + (f" with the patch layer {layer['name']} ({layer['digest']})" if layer else ""))
    try:
        replayed = replay_story(recorded)
    finally:
        patch_layer.uninstall()
    if replayed.status == CANNOT:
        _error(f"cannot be replayed here: {replayed.why}")
        return CANNOT_PLAY
    if replayed.status == NOW_PASSES:
        print(f"passes now: {replayed.why}")
        return PASSES
    print(f"still fails {replayed.why}")
    again = replayed.again
    if again is None or again.code != recorded.code:
        return STILL_FAILS
    print("  " + again.failure.strip().replace("\n", "\n  "))
    if recorded.same_program(again):
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

"""What every multi-patch reference fix's tests check the same way."""
from __future__ import annotations

from pathlib import Path

import pytest

import reference_fix
from properties.story.playback import playing
from properties.violation import InvariantViolated
from harness.world import agentscope_under_test
from reference_fix.diffs import combined_diff

PATCHES_DIR = Path(__file__).resolve().parent.parent / "patches"


def violation(play, **machine) -> str | None:
    """The violation a story breaks (``play`` moves it, then it settles),
    played back with ``machine``'s settings; None if it holds."""
    try:
        with playing(**machine) as story:
            play(story)
            story.everything_settles()
            return None
    except InvariantViolated as broken:
        return str(broken)


def alone(name: str):
    """A fixture's body: the patches of the fix ``name`` for the installed
    release, none applied, with every other fix taken off for the test and
    put back after it."""
    patches = [p for p in reference_fix.FIXES[name] if agentscope_under_test.version() in p.targets]
    assert patches and all(p.refusal() is None for p in patches)
    was = reference_fix.is_applied()
    if was:
        reference_fix.remove()
    yield patches
    for patch in reversed(patches):
        patch.remove()
    if was:
        reference_fix.apply()


def changed(diff: str) -> list[str]:
    """A diff's removed and added lines, without file headers, line
    numbers or context (in which the releases differ)."""
    return [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]


def check_diff_file(patches, name: str) -> None:
    """``patches/agentscope-2.0.8-<name>.diff`` is the fix's diff on 2.0.8,
    and on the other releases it targets the same changed lines (at other
    line numbers, amid other context where the method differs); and each
    patch's new text is in it (the runtime patch compiles that text)."""
    shipped = (PATCHES_DIR / f"agentscope-2.0.8-{name}.diff").read_text(encoding="utf-8")
    here = combined_diff(patches)
    if agentscope_under_test.version() == "2.0.8":
        assert here == shipped
    assert changed(here) == changed(shipped)
    added = [l[1:] for l in shipped.splitlines() if l.startswith("+") and not l.startswith("+++")]
    for patch in patches:
        new = [l for l in patch.after.splitlines() if l not in patch.before.splitlines()]
        assert new and all(line in added for line in new), patch.name


def check_refusals(patches) -> None:
    """Each patch refuses a release it was not written for, and a targeted
    release whose code is not the text it replaces."""
    for patch in patches:
        with pytest.raises(reference_fix.FixRefused, match="this agentscope is 2.0.6"):
            patch.check_target("2.0.6", patch.before)
        with pytest.raises(reference_fix.FixRefused, match="does not contain the code"):
            patch.check_target("2.0.8", patch.before[: len(patch.before) // 2])

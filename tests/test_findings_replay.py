"""Every committed finding still replays: same failure, same message, same trace.

``docs/findings/counterexamples/`` holds the folders the release sweep
wrote. Each folder found on the agentscope installed here must still fail
the same way when replayed, with a byte-identical bus trace, so that the
harness can change without the findings silently going stale. (The gate's
environments check the other releases; see docs/findings.md.)
"""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.world import agentscope_under_test
from properties.story.record import Counterexample
from properties.story.playback import replay

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings" / "counterexamples"
FOLDERS = sorted(p for p in FINDINGS.iterdir() if (p / "story.json").is_file())
#: The folders found on the agentscope installed here.
HERE = [
    folder for folder in FOLDERS
    if Counterexample.load(folder).agentscope_version == agentscope_under_test.version()
]


def test_the_findings_are_committed():
    codes = {folder.name.split("-")[0] for folder in FOLDERS}
    assert {"I1", "I8", "I9", "I11", "I13", "I14"} <= codes


@pytest.mark.parametrize("folder", HERE, ids=lambda p: p.name)
def test_a_finding_fails_again_with_its_recorded_trace(folder: Path):
    recorded = Counterexample.load(folder)
    failure = replay(recorded)
    again = getattr(failure, "counterexample", None)
    assert again is not None, f"the story no longer fails: {failure!r}"
    assert again.code == recorded.code
    assert again.trace == recorded.trace
    assert again.failure == recorded.failure  # ids as the trace shows them

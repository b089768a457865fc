"""The harness finds the parked-inbox bug where it exists, and only there.

Against an agentscope with the bug (2.0.7, 2.0.8, unpatched) each scenario
must fail I1, and its shrunk program (Hypothesis finds, the suite's
shrinker deletes steps) must tell the bug report's story in at most six
rule calls: park on a tool call, a payload arrives,
the run reaches its turn tail. Against a release that fixed it (2.0.9 on),
or with ``--hitl-reference-fix``, the same scenarios must hold. Either way the
verdict is asserted: nothing here is skipped or expected to fail.
"""
from __future__ import annotations

import pytest
from hypothesis import settings

from reference_fix import parked_continuation
from harness.world import agentscope_under_test
from harness.world.cast import LEADER, SOLO, WORKER
from properties.story.program import program_lines, story_steps
from properties.story.shrink import search
from properties.violation import InvariantViolated
from properties.machine import machine_enforcing

#: How many stories each shape's search may play: each is met late in the
#: derandomized search (a worker asking for confirmation, and a solo
#: session fed by a channel: not within a hundred stories, within two
#: hundred; a worker awaiting an external job: within three hundred).
EXAMPLES = {"team-worker-asking": 200, "team-worker-submitted": 400, "solo-session-channel": 200}

#: Three shapes of the same bug, each with the rules it needs.
SCENARIOS = {
    "team-worker-asking": dict(
        turns=("calls GatedAction",),
        cast=(LEADER, WORKER),
        messaged=(),
    ),
    "team-worker-submitted": dict(
        turns=("calls ExternalJob",),
        cast=(LEADER, WORKER),
        messaged=(),
    ),
    "solo-session-channel": dict(
        turns=("calls GatedAction",),
        cast=(SOLO,),
        sources=("channel",),
    ),
}

def has_the_bug() -> bool:
    """Whether the agentscope under test should show the bug."""
    return (
        agentscope_under_test.version() in parked_continuation.TARGET_RELEASES
        and not parked_continuation.is_applied()
    )


def play(scenario: str) -> InvariantViolated | None:
    """Run one scenario's I1 property as the property suite searches: the
    violation, if any, shrunk by deleting steps, its program in its notes."""
    try:
        search(
            machine_enforcing("I1", **SCENARIOS[scenario]),
            settings(
                settings.get_profile("ci"),
                max_examples=EXAMPLES.get(scenario, 100),
                stateful_step_count=8,
            ),
        )
    except InvariantViolated as violation:
        return violation
    return None


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_parked_inbox_bug_is_found_exactly_where_it_exists(scenario: str) -> None:
    violation = play(scenario)
    if not has_the_bug():
        assert violation is None, (
            f"{agentscope_under_test.describe()} should hold I1 in {scenario}:\n"
            + "\n".join(program_lines(violation))
        )
        return
    assert violation is not None, f"the bug in {agentscope_under_test.describe()} was not found"
    assert violation.code == "I1"
    story = "\n".join(program_lines(violation))
    steps = [rule for rule, _ in story_steps(violation)]
    assert 0 < len(steps) <= 6, f"story too long ({len(steps)} steps):\n{story}"
    parks = "leader_invites_worker" if WORKER in SCENARIOS[scenario]["cast"] else "user_sends_message"
    assert parks in steps and "payload_arrives" in steps, story
    assert steps.index(parks) < steps.index("payload_arrives"), story
    if WORKER in SCENARIOS[scenario]["cast"]:
        assert "to='worker'" in story, story
    assert SCENARIOS[scenario]["turns"][0] in story, story
    if scenario.startswith("solo"):
        assert "source='channel'" in story and "to='solo'" in story, story

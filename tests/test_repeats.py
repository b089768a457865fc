"""A world that only repeats itself, on agentscope itself.

- The wake-up dispatcher's retry loop behind a crashed run's session lock
  (a resume re-queued every 0.1 s until the lease runs out, 300 virtual
  seconds on) is left out while the world settles: the story ends exactly
  as when every retry is played (the same trace after the repetitions, the
  same clock, the same events), at a fraction of the operations.
- A build of agentscope that wakes a parked session again and again (a
  small source patch of this test's own: ``_run_impl`` no longer drops the
  wake-up of a parked session, so each wake is a fresh run that fails and
  hands the payload back) is reported as a livelock, as a violation of
  I11, after a fixed number of repetitions.
"""
from __future__ import annotations

import pytest
from agentscope.app.message_bus import MessageBusKeys

import reference_fix
from harness.kernel.repeats import LIVELOCK_AFTER
from harness.world import agentscope_under_test
from properties.story.playback import playing, story_machine
from properties.violation import InvariantViolated

CRASH_STORY = dict(cast=["leader", "solo"], crashes=True, turns=["calls GatedAction", "answers"])


def _retry_storm(skip: bool) -> tuple[list[str], float, list[str]]:
    """solo parks on a confirmation, its process dies holding the session
    lock, the user confirms: the resume waits for the lease. The trace,
    the clock and solo's events once settled."""
    machine = story_machine(["I11"], **CRASH_STORY)
    try:
        machine.world.interleaver.skip_repeats = skip
        machine.user_sends_message(session="solo", model_turn="calls GatedAction")
        machine.process_crashes(session="solo")
        machine.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False)
        machine.world.settle()
        events = [e["type"] for e in machine.world.published("solo")]
        return machine.world.render_trace().splitlines(), machine.world.clock.now(), events
    finally:
        machine.world.close()


def test_the_retry_storm_behind_a_dead_lease_is_left_out_and_ends_as_played():
    played, played_at, played_events = _retry_storm(skip=False)
    skipped, skipped_at, skipped_events = _retry_storm(skip=True)
    marker = next(n for n, line in enumerate(skipped) if "left out" in line)
    after = skipped[marker + 1:]
    assert skipped[:marker] == played[:marker]
    assert played[-len(after):] == after, "after the left-out retries, the same operations, numbered the same"
    assert any("is_locked" in line and "-> False" in line for line in after)
    assert skipped_at == played_at and skipped_events == played_events
    assert len(played) > 10_000 and len(skipped) < 200


@pytest.fixture
def wakes_parked_sessions():
    """agentscope with its parked-wake-up guard taken out."""
    patch = reference_fix.SourcePatch(
        name="wakes-parked-sessions", module="agentscope.app._service._chat", cls="ChatService",
        method="_run_impl", before="if self._skip_parked_wakeup(session_id, agent, input_msg):",
        after="if False:", targets=(agentscope_under_test.version(),), covers=(),
        what="a wake-up of a parked session runs it",
    )
    patch.apply()
    yield
    patch.remove()


#: Releases whose runs end by storing the session's event cursor (2.0.10
#: on): it advances with each wake, so no wake repeats the world exactly
#: and the same livelock is reported as restless (bounded work per virtual
#: second) instead.
CURSOR_ADVANCES = hasattr(MessageBusKeys, "session_event_checkpoint")


def test_a_session_woken_again_and_again_is_a_livelock(wakes_parked_sessions):
    said = "Restless: .* wake-run:solo acquire_lock" if CURSOR_ADVANCES else "only repeats itself"
    with pytest.raises(InvariantViolated, match=said) as raised:
        with playing(enforcing=["I17"], **CRASH_STORY) as story:
            story.user_sends_message(session="solo", model_turn="calls GatedAction")
            story.run_continues(session="solo")
            story.payload_arrives(source="channel", to="solo")
            story.everything_settles()
    assert raised.value.code == "I17"
    trace = raised.value.trace.splitlines()
    wakes = [line for line in trace if "wake-run" in line and "acquire_lock" in line and "session:lock" in line]
    if CURSOR_ADVANCES:  # reported once the work per virtual second is over its bound
        assert len(wakes) > LIVELOCK_AFTER + 2
    else:
        assert LIVELOCK_AFTER <= len(wakes) <= LIVELOCK_AFTER + 2, "reported after a fixed number of wakes"

"""Stopping a reply while its model is answering, on the real cancel path.

On a streaming machine every model call is a switch point, so a new run
can be held mid-answer. The stop button then goes through agentscope's
interrupt route, the interrupt channel and its ``CancelDispatcher``, and
the cancel lands inside the model call, as it does for a real user.
"""
from __future__ import annotations

from harness.kernel.controlled_bus import describe_payload
from properties.story.playback import playing


def test_a_new_run_stops_while_its_model_answers() -> None:
    with playing(["I9"], interrupts=True, streaming=True, cast=("leader", "solo")) as story:
        story.user_sends_message(session="leader", model_turn="calls GatedAction")
        run = story.world.run_of("leader")
        assert run is not None and run.held
        assert str(run.pending) == "model_call leader"
        assert story.world.observe_session("leader").parked_status == "idle"


def test_stop_mid_answer_cancels_the_model_call_and_ends_the_reply() -> None:
    with playing(["I9"], interrupts=True, streaming=True, cast=("leader", "solo")) as story:
        story.user_sends_message(session="leader", model_turn="calls GatedAction")
        story.user_interrupts(session="leader")
        story.everything_settles()
        events = [describe_payload(e) for e in story.world.published("leader")]
    assert events == [
        "REPLY_START",
        "MODEL_CALL_START",
        "MODEL_CALL_END finished_reason=interrupted",
        "REPLY_END finished_reason=interrupted",
    ]
    trace = story.world.render_trace()
    assert "cancel-dispatcher:interrupt" in trace
    assert "model_call" not in trace  # cancelled before it answered


def test_an_interrupt_reaches_the_cancel_dispatcher_within_the_publishers_step() -> None:
    """The delivery bound of agentscope's in-memory bus: a published message
    is on every subscriber's queue at once. The story may not hold it while
    the interrupted run goes on (the old, unreal F3 story did exactly that):
    right after the user's stop, nothing waits at a ``receive``, and the
    trace shows the delivery next to the publish."""
    with playing(["I9"], interrupts=True, streaming=True, cast=("leader", "solo")) as story:
        story.user_sends_message(session="leader", model_turn="calls GatedAction")
        story.user_interrupts(session="leader")
        held = [r.pending.name for r in story.world.interleaver.held()]
        assert "receive" not in held
        lines = story.world.render_trace().splitlines()
        publish = next(i for i, line in enumerate(lines) if "publish        agentscope:session:interrupt" in line)
        assert "receive" in lines[publish + 1] and "cancel-dispatcher:interrupt" in lines[publish + 1]

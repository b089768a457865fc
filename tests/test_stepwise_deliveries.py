"""Step-by-step deliveries (flag ``stepwise_deliveries``): the delivery
stops before its first bus operation and moves with the session's run and
the dispatcher in the drawn order; a party that cannot move passes its
move on; the ledger's delivery order is the inbox's arrival order."""
from __future__ import annotations

from properties import reach, windows
from properties.machine import machine_for
from properties.rules.story_rule import sentence
from properties.story.playback import playing


def _ops(story, task_prefix: str) -> list[str]:
    return [e.op for e in story.world.interleaver.trace.entries if e.task.startswith(task_prefix)]


def test_the_delivery_stops_before_its_first_bus_operation_and_goes_on_as_a_movable_task():
    with playing(enforcing=["I5"], stepwise_deliveries=True, cast=["leader", "solo"]) as story:
        story.payload_arrives_step_by_step(source="channel", to="solo", moves=["delivery", "delivery"])
        assert _ops(story, "» channel delivers to solo") == ["acquire_lock", "queue_push"]
        assert "» channel delivers to solo" in story.world.movable_tasks()
        story.everything_settles()
    assert _ops(story, "» channel delivers to solo")[-2:] == ["queue_push", "publish"]  # its wake-up


def test_a_party_that_cannot_move_passes_its_move_on():
    """No run, and the dispatcher has nothing to do: the delivery takes
    their moves."""
    with playing(enforcing=["I5"], stepwise_deliveries=True, cast=["leader", "solo"]) as story:
        story.payload_arrives_step_by_step(source="channel", to="solo", moves=["run", "dispatcher", "run"])
        assert _ops(story, "» channel delivers to solo") == ["acquire_lock", "queue_push", "registry_get"]


def test_a_delivery_overtaken_before_its_push_is_expected_in_arrival_order():
    """A held delivery's payload lands after a later one's: the hand-off
    keeps the inbox's arrival order, and so does the ledger (I5 holds)."""
    with playing(enforcing=["I5"], stepwise_deliveries=True, cast=["leader", "solo"]) as story:
        story.payload_arrives_step_by_step(source="channel", to="solo", moves=[])
        story.payload_arrives(source="background task", to="solo")
        story.everything_settles()
    assert story.ledger.delivered["solo"] == ["payload-2 from background task", "payload-1 from channel"]


def test_the_story_says_each_partys_moves():
    said = sentence("payload_arrives_step_by_step", {
        "source": "channel", "to": "solo", "moves": ["run", "run", "delivery", "new delivery", "dispatcher"],
    })
    assert "solo's run ×2, a delivery, a new delivery begins, the wake-up dispatcher" in said


def test_machines_without_the_flag_have_no_such_rule():
    assert hasattr(machine_for("I5"), "payload_arrives_step_by_step")
    assert not hasattr(machine_for("I1"), "payload_arrives_step_by_step")


def test_wake_ups_still_owed_meet_the_runs_turn_tail_check():
    """The two first deliveries read no registration and stop before their
    wake-ups; the run they were for drains them and stops at its turn
    tail, where the third delivery's payload waits. A wake-up landing in
    the check, between its drain and its put-back, is a hand-off order the
    other rules reach only in about twenty drawn moves (docs/reach.md)."""
    with playing(enforcing=["I5"], stepwise_deliveries=True, late_wakeups=True, cast=["leader", "solo"]) as story:
        story.wakeups_outlast_a_turn(
            source="channel", to="solo", model_turn="answers", moves=["run", "run", "run", "delivery", "run"],
        )
        played = windows.Story.played(story.world, story.ledger)
        reached = reach.story_orders(played.entries, played.sessions)
        story.everything_settles()
    assert {"c.drain→p.wake", "p.wake→c.put-back"} <= reached
    assert story.ledger.delivered["solo"] == [f"payload-{n} from channel" for n in (1, 2, 4)]

"""Same choices, same run, byte for byte.

A story played twice on fresh worlds must give the identical operation
trace (task, operation, key, result, in order): that is what makes a shrunk
counterexample replay exactly. The story is the one from the bug report,
played step by step without Hypothesis.
"""
from __future__ import annotations

from properties.machine import HitlMachine


def play_the_report_story() -> str:
    machine = HitlMachine()
    try:
        for step in (
            lambda: machine.leader_invites_worker(worker_first_turn="calls GatedAction"),
            lambda: machine.dispatcher_processes_queue(),
            lambda: machine.payload_arrives(source="team member", to="worker"),
            lambda: machine.run_continues(session="worker"),
            lambda: machine.everything_settles(),
        ):
            try:
                step()
            except AssertionError:
                break  # the violation is part of the story on a buggy release
        return machine.world.render_trace()
    finally:
        machine.world.close()


def test_replaying_a_story_gives_the_identical_trace():
    first = play_the_report_story()
    second = play_the_report_story()
    assert first.count("\n") > 50, "the story should have exercised the bus"
    assert "wake-run:worker" in first
    assert first == second


def play_a_background_job_story() -> str:
    """A job moved to the background (agentscope draws its task id at
    random), finished, delivered, and the session woken for it."""
    from properties.machine import machine_enforcing
    from properties.rules.vocabulary import BACKGROUND

    machine = machine_enforcing("I14", background_jobs=True, turns=(BACKGROUND,))()
    try:
        machine.user_sends_message(session="solo", model_turn=BACKGROUND)
        machine.time_passes(seconds=31.0)
        machine.run_continues(session="solo")
        machine.background_job_finishes(session="solo")
        machine.everything_settles()
        return machine.world.render_trace()
    finally:
        machine.world.close()


def test_a_background_job_story_replays_identically():
    first = play_a_background_job_story()
    assert "registry_set   agentscope:bg_tasks:solo#job1" in first
    assert "_deliver_when_done" in first and "wake-run:solo" in first
    assert first == play_a_background_job_story()

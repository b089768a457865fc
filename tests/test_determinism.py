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
        return machine.w.render_trace()
    finally:
        machine.w.close()


def test_replaying_a_story_gives_the_identical_trace():
    first = play_the_report_story()
    second = play_the_report_story()
    assert first.count("\n") > 50, "the story should have exercised the bus"
    assert "wake-run:worker" in first
    assert first == second

"""The two fixes for stops after a turn: ``stop-after-parking`` (F3) and
``clean-up-survives-stops`` (F8, F10). Their stories fail without them and
hold with them.

Each story is a committed counterexample's (F3: ``I9-*``, two steps; F8:
``I5-*``, four steps), played on the installed release; or the stop F3's
first fix still lost, one that reaches a parked run while its clean-up
waits for the saving of its state; or a stop that lands as a run
registers as its inbox's consumer, before the clean-up's ``try``. Each
fix also ships as a diff per release, checked against the runtime change.
"""
from __future__ import annotations

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.story.playback import playing
from properties.violation import InvariantViolated
from reference_fix import clean_up_survives_stops, stop_after_parking
from reference_fix.diffs import combined_diff, diff_path

STORY = dict(
    bus_faults=False, cast=["leader", "solo"], crashes=False, interrupts=True,
    messaged=["leader", "solo"], parked_messages=False,
    sources=["team member", "channel", "background task"],
    turns=["calls GatedAction", "calls ExternalJob", "answers"],
)


def _fix(name: str) -> list[reference_fix.SourcePatch]:
    """The patches of fix ``name`` for the installed release."""
    release = agentscope_under_test.version()
    chosen = [p for p in reference_fix.FIXES[name] if release in p.targets]
    assert chosen and all(p.refusal() is None for p in chosen), f"{name} does not apply to {release}"
    return chosen


def _violation(enforcing: str, play) -> str | None:
    """Play a story; the violation it ends in, or None if it holds."""
    try:
        with playing(enforcing=[enforcing], **STORY) as story:
            play(story)
            story.everything_settles()
            return None if enforcing != "I9" else story.world.observe_session("leader").last_reply_end()
    except InvariantViolated as violation:
        return str(violation)


def _stop_once_parked(story) -> None:
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    story.user_interrupts(session="leader")


def _saving_state(story, session: str) -> bool:
    """Whether ``session``'s run waits for its clean-up's saving of its
    state (a task working for it is held at the trim of the session's
    event log, the save's last bus operation)."""
    run = story.world.run_of(session)
    return run is not None and any(
        t.held and t.pending is not None and t.pending.name == "log_trim"
        for t in story.world.actors.working_for(run)
    )


def _stop_in_the_clean_up(story) -> None:
    """The run parks on the card, checks its inbox and saves its state;
    the stop lands in its wait for that save, after the turn tail."""
    story.user_sends_message(session="leader", model_turn="calls GatedAction")
    for _ in range(20):
        if _saving_state(story, "leader") or story.world.run_of("leader") is None:
            break
        story.one_task_takes_a_step(task=story.world.run_of("leader").label)
    assert _saving_state(story, "leader"), "the run never saved its state after parking"
    story.user_interrupts(session="leader")


def _stop_as_the_run_registers(story) -> None:
    """A channel payload wakes idle solo; the stop lands as its run
    registers as the inbox consumer, before the ``try`` whose clean-up
    hands the registration back."""
    if story.world.run_of("solo") is None:
        story.payload_arrives(source="channel", to="solo")
    for _ in range(20):
        run = story.world.run_of("solo")
        if run is not None and run.pending is not None and run.pending.name == "registry_set":
            break
        story.one_task_takes_a_step(task=run.label if run is not None else "wakeup-dispatcher")
    assert run is not None and run.pending.name == "registry_set", "the run never registered"
    story.user_interrupts(session="solo")


def _stop_before_the_run_starts(story) -> None:
    """A channel payload wakes idle solo. The user presses stop after the
    dispatcher spawned its run, before the run took the session lock: the
    stop queues a resume carrying the interrupt. A second stop cancels the
    run before its first reply, so the resume meets a session that has
    never replied, with nothing to end."""
    story.payload_arrives(source="channel", to="solo")
    for _ in range(20):
        if story.world.run_of("solo") is not None:
            break
        story.one_task_takes_a_step(task="wakeup-dispatcher")
    story.user_interrupts(session="solo")
    _stop_as_the_run_registers(story)


def _stop_twice_in_turn_tail(story) -> None:
    story.payload_arrives(source="channel", to="solo")
    story.dispatcher_processes_queue()
    story.user_interrupts(session="solo")
    story.user_interrupts(session="solo")


class _Applied:
    """Applies fixes by name, in the catalog's order; removes them after."""

    def __init__(self) -> None:
        self.patches: list[reference_fix.SourcePatch] = []

    def __call__(self, *names: str) -> None:
        for name in reference_fix.FIXES:
            if name in names:
                for patch in _fix(name):
                    patch.apply()
                    self.patches.append(patch)


@pytest.fixture
def applied():
    was = reference_fix.is_applied()
    if was:
        reference_fix.remove()
    fixes = _Applied()
    yield fixes
    for patch in reversed(fixes.patches):
        patch.remove()
    if was:
        reference_fix.apply()


def test_a_stop_once_the_card_shows_is_lost_unless_fixed(applied):
    assert "I9" in _violation("I9", _stop_once_parked)
    applied("clean-up-survives-stops", "stop-after-parking")
    assert _violation("I9", _stop_once_parked) == "interrupted"


def test_a_stop_after_parking_is_honoured_without_the_clean_up_fix(applied):
    applied("stop-after-parking")
    assert _violation("I9", _stop_once_parked) == "interrupted"


def test_a_stop_in_the_clean_up_of_a_parked_run_ends_the_reply(applied):
    assert "I9" in _violation("I9", _stop_in_the_clean_up)
    applied("stop-after-parking")
    assert _violation("I9", _stop_in_the_clean_up) == "interrupted"


def test_a_stop_in_the_clean_up_ends_the_reply_with_every_fix(applied):
    applied(*reference_fix.plan().applied)
    assert _violation("I9", _stop_in_the_clean_up) == "interrupted"


def test_a_second_stop_in_the_clean_up_loses_the_payload_unless_fixed(applied):
    assert "I5" in _violation("I5", _stop_twice_in_turn_tail)
    applied("clean-up-survives-stops")
    assert _violation("I5", _stop_twice_in_turn_tail) is None


def test_a_stop_with_nothing_to_end_opens_no_reply_unless_fixed(applied):
    assert "I10" in _violation("I10", _stop_before_the_run_starts)
    applied("stop-after-parking")
    assert _violation("I10", _stop_before_the_run_starts) is None


def test_a_stop_as_the_run_registers_leaves_the_registration_unless_fixed(applied):
    assert "I3" in _violation("I3", _stop_as_the_run_registers)
    applied("clean-up-survives-stops")
    assert _violation("I3", _stop_as_the_run_registers) is None


@pytest.mark.parametrize("name, marks", [
    ("clean-up-survives-stops", ["asyncio.shield(persist_task)", "raise cancelled",
                                 "                await register_inbox_consumer(self._message_bus, session_id)"]),
    ("stop-after-parking", ['task.cancel("user interrupt")', "UserInterruptEvent(", "current.cancel(*exc.args)",
                            'if exc.args == ("user interrupt",):']),
])
def test_the_diff_is_the_runtime_change(name, marks):
    shipped = diff_path(name, agentscope_under_test.version()).read_text(encoding="utf-8")
    assert combined_diff(_fix(name)).strip() == shipped.strip()
    added = "\n".join(l[1:] for l in shipped.splitlines() if l.startswith("+") and not l.startswith("+++"))
    assert all(mark in added for mark in marks)


def test_they_refuse_a_release_they_were_not_written_for():
    with pytest.raises(reference_fix.FixRefused, match=r"this agentscope is 2\.0\.6"):
        clean_up_survives_stops.PATCH.check_target("2.0.6", "")
    with pytest.raises(reference_fix.FixRefused, match="does not contain the code"):
        stop_after_parking.RUN_WITH_SOP.check_target("2.0.11", stop_after_parking.CALL_BEFORE)

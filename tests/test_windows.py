"""Risky windows are recognised in a story's trace, and every property
declares the windows its search must reach."""
from __future__ import annotations

import pytest

from harness.kernel.trace import Trace
from properties import windows
from properties.catalog import PROPERTIES
from properties.ledger import Ledger
from properties.story.playback import playing
from properties.violation import InvariantViolated

S = "sid-1"


def _story(*ops: tuple[str, str, str, str], ledger: Ledger | None = None) -> windows.Story:
    trace = Trace()
    for task, op, key, detail in ops:
        trace.record(task, op, key, detail)
    return windows.Story(tuple(trace.entries), ledger or Ledger(), {"solo": S})


CARD = ("chat-run:solo", "log_append", f"agentscope:session:events:{S}", "REQUIRE_USER_CONFIRM")
TAIL = ("chat-run:solo", "acquire_lock", f"agentscope:inbox:lock:{S}", "acquired")
STOP = ("cancel-dispatcher:interrupt", "receive", "agentscope:session:interrupt", f"session_id={S}")
RELEASE = ("chat-run:solo", "release_lock", f"agentscope:session:lock:{S}", "")


def test_every_property_declares_windows_that_exist():
    for prop in PROPERTIES:
        assert prop.windows, f"{prop.code} declares no window"
        unknown = set(prop.windows) - set(windows.BY_SLUG)
        assert not unknown, f"{prop.code}: no such window {unknown}"


def test_a_payload_counts_only_between_the_card_and_the_inbox_check():
    push = ("» channel delivers to solo", "queue_push", f"agentscope:inbox:{S}", "hint")
    assert windows.payload_in_parked_tail(_story(CARD, push, TAIL)) == 1
    assert windows.payload_in_parked_tail(_story(CARD, TAIL, push)) == 0
    assert windows.payload_in_parked_tail(_story(push, CARD, TAIL)) == 0


def test_a_stop_counts_while_the_card_shows_and_the_lock_is_held():
    assert windows.stop_while_card_shows(_story(CARD, STOP, TAIL, RELEASE)) == 1
    assert windows.stop_while_card_shows(_story(CARD, TAIL, RELEASE, STOP)) == 0
    other = ("cancel-dispatcher:interrupt", "receive", "agentscope:session:interrupt", "session_id=sid-2")
    assert windows.stop_while_card_shows(_story(CARD, other, RELEASE)) == 0


def test_a_stop_counts_in_the_clean_up_only_after_the_parked_turn_tail():
    checked = ("chat-run:solo", "release_lock", f"agentscope:inbox:lock:{S}", "")
    trim = ("_persist", "log_trim", f"agentscope:session:events:{S}", "")
    assert windows.stop_in_parked_clean_up(_story(CARD, TAIL, checked, STOP, trim, RELEASE)) == 1
    assert windows.stop_in_parked_clean_up(_story(CARD, STOP, TAIL, checked, trim, RELEASE)) == 0
    assert windows.stop_in_parked_clean_up(_story(TAIL, checked, STOP, trim, RELEASE)) == 0
    assert windows.stop_in_parked_clean_up(_story(CARD, TAIL, checked, trim, STOP, RELEASE)) == 0


def test_inbox_checks_are_counted_by_what_they_find():
    def check(found: int):
        return [TAIL, ("chat-run:solo", "queue_drain", f"agentscope:inbox:{S}", f"{found} entries")]

    story = _story(*check(0), *check(1), *check(3))
    assert [windows.inbox_check_finds(0, 0)(story), windows.inbox_check_finds(1, 1)(story),
            windows.inbox_check_finds(2, None)(story)] == [1, 1, 1]


def test_the_verdict_names_unreached_windows():
    assert windows.describe("holds", {"a": 3, "b": 0}, ["a", "b"]) == "holds, unreached: b"
    assert windows.describe("holds", {"a": 3, "b": 1}, ["a", "b"]) == "holds (a ×3, b ×1)"
    assert windows.describe("VIOLATED", {"a": 0}, ["a"]) == "VIOLATED (a ×0)"


@pytest.mark.parametrize("two_stops", [False, True])
def test_a_played_story_counts_its_windows(two_stops):
    try:
        with playing(enforcing=["I9"], interrupts=True, cast=["leader", "solo"]) as story:
            story.user_sends_message(session="leader", model_turn="calls GatedAction")
            story.user_interrupts(session="leader")
            if two_stops:
                story.user_interrupts(session="leader")
            story.everything_settles()
    except InvariantViolated:
        pass  # F3, on a release without its fix: the windows are what matter here
    played = windows.Story.played(story.world, story.ledger)
    reached = windows.count(played, ["stop-while-card-shows", "two-stops-one-run"])
    assert reached["stop-while-card-shows"] >= 1
    assert reached["two-stops-one-run"] == (1 if two_stops else 0)


def test_every_window_counts_on_a_played_story_with_every_kind_of_ledger_entry():
    """Each window reads the ledger as the rules write it (a message sent
    while a run is in flight counts as ``message-while-busy``)."""
    with playing(enforcing=["I15"], cast=["leader", "solo"]) as story:
        story.user_sends_message(session="solo", model_turn="answers")
        story.user_sends_message(session="solo", model_turn="answers")  # its run is still at its turn tail
        played = windows.Story.played(story.world, story.ledger)
        reached = windows.count(played, windows.BY_SLUG)
    assert reached["message-while-busy"] == 1


@pytest.mark.parametrize("late", [False, True])
def test_a_late_wakeup_lets_a_run_start_between_the_check_and_the_wakeup(late):
    """The window a producer leaves between finding no consumer and queueing
    the wake-up it owes is reached only when its wake-up comes late."""
    with playing(enforcing=["I5"], late_wakeups=True, cast=["leader", "solo"]) as story:
        if late:
            story.payload_arrives_wakeup_late(source="channel", to="solo")
        else:
            story.payload_arrives(source="channel", to="solo")
        story.user_sends_message(session="solo", model_turn="answers")
        story.everything_settles()
    played = windows.Story.played(story.world, story.ledger)
    assert windows.count(played, ["producer-check-then-act"])["producer-check-then-act"] == (1 if late else 0)


def test_a_hand_off_call_a_run_makes_in_a_task_of_its_own_is_the_runs():
    """A reference fix awaits the turn-tail check in a task of its own
    (``drain-survives-stops``): its operations are the run's, so its
    windows are counted; a task the run starts for other work stays its
    own."""
    check = "has_pending_inbox_or_release"
    ops = [
        (check, "acquire_lock", f"agentscope:inbox:lock:{S}", "acquired"),
        (check, "queue_drain", f"agentscope:inbox:{S}", "1 entries"),
        ("BackgroundJob", "queue_push", f"agentscope:inbox:{S}", "hint"),
    ]
    trace = Trace()
    for op in ops:
        trace.record(*op)
    creators = {check: "chat-run:solo", "BackgroundJob": "chat-run:solo"}
    relabelled = windows.as_their_runs(trace.entries, creators)
    assert [e.task for e in relabelled] == ["chat-run:solo", "chat-run:solo", "BackgroundJob"]
    story = windows.Story(relabelled, Ledger(), {"solo": S})
    assert windows.inbox_check_finds(1, 1)(story) == 1
    assert windows.inbox_check_finds(1, 1)(windows.Story(tuple(trace.entries), Ledger(), {"solo": S})) == 0

"""How a rule's session argument is drawn: among the sessions for which
its question holds, and, with ``favour``, more often among those for which
a second question holds too (a delivery favours a session whose run is
live, the window where a payload can meet it)."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from properties.rules.story_rule import Chosen, Where


class _Machine:
    """What ``Where`` reads of a machine: its cast, its world's sessions
    and its questions. ``solo`` has a live run; ``worker`` no session."""

    cast = ("leader", "worker", "solo")
    world = SimpleNamespace(sessions={"leader": "s-leader", "solo": "s-solo"})
    turns = ("calls GatedAction", "calls ExternalJob", "answers")

    def exists(self, session: str) -> bool:
        return session in self.world.sessions

    def has_run(self, session: str) -> bool:
        return session == "solo"

    def parked(self, session: str) -> bool:
        return False


def test_the_choices_are_the_opened_sessions_the_question_holds_for_and_the_favoured_among_them():
    machine = _Machine()
    assert Where("exists").choices(machine) == (["leader", "solo"], [])
    assert Where("exists", favour="has_run").choices(machine) == (["leader", "solo"], ["solo"])
    assert Where("exists", opened=False, favour="parked").choices(machine) == (
        ["leader", "solo"], [])


class TestDraws(_Machine):
    """The test class is Hypothesis' runner: ``Where`` draws from it."""

    @settings(max_examples=5, derandomize=True, database=None)
    @given(st.data())
    def test_a_favoured_session_is_drawn_about_three_times_in_four(self, data):
        favoured = Counter(data.draw(Where("exists", favour="has_run").strategy()) for _ in range(400))
        plain = Counter(data.draw(Where("exists").strategy()) for _ in range(400))
        assume(len(plain) == 2)  # not Hypothesis' first, simplest example: every draw the first
        assert set(favoured) == {"leader", "solo"}
        assert 0.65 < favoured["solo"] / 400 < 0.85
        assert 0.35 < plain["solo"] / 400 < 0.65

    @settings(max_examples=5, derandomize=True, database=None)
    @given(st.data())
    def test_a_favoured_value_is_drawn_more_often_and_the_others_still(self, data):
        self.favoured_turns = ("answers",)
        favoured = Counter(data.draw(Chosen("turns").strategy()) for _ in range(600))
        del self.favoured_turns
        plain = Counter(data.draw(Chosen("turns").strategy()) for _ in range(600))
        assume(len(plain) == 3)  # not Hypothesis' first, simplest example
        assert set(favoured) == set(self.turns)
        assert 0.55 < favoured["answers"] / 600 < 0.8
        assert 0.2 < plain["answers"] / 600 < 0.47

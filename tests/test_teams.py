"""Two teams at once: each leader hears of its own members only.

The leader's crew (worker, helper) and the chief's band (aide) are minted
by agentscope's own ``AgentInvite``; their failure reminders must reach
their own leader, once each (I2, I10).
"""
from __future__ import annotations

from harness.world.marks import FAILURE_REMINDER_MARK
from harness.world.stage import Stage
from properties.rules.vocabulary import FAILS, TURNS
from properties.story.playback import playing

TWO_TEAMS = dict(
    several_teams=True,
    turns=(*TURNS, FAILS),
    cast=("leader", "worker", "helper", "chief", "aide"),
    messaged=("leader", "chief"),
)


def _reminders(story, alias: str) -> list[str]:
    view = story.world.observe_session(alias)
    return [
        str(p.get("hint")) for p in view.inbox_pushes if FAILURE_REMINDER_MARK in str(p.get("hint"))
    ]


def test_each_leader_hears_of_its_own_members_failures_once():
    with playing(["I2", "I10"], **TWO_TEAMS) as story:
        story.leader_invites_member(member="aide", first_turn=FAILS)
        story.leader_invites_member(member="helper", first_turn="calls GatedAction")
        story.leader_invites_worker(worker_first_turn=FAILS)
        story.everything_settles()
        assert set(story.world.sessions) >= {"worker", "helper", "aide", "chief"}
        leader_told, chief_told = _reminders(story, "leader"), _reminders(story, "chief")
        helper = story.world.observe_session("helper")
    assert len(leader_told) == 1 and "'worker'" in leader_told[0]
    assert len(chief_told) == 1 and "'aide'" in chief_told[0]
    assert helper.parked_status == "awaiting_permission"  # a healthy member, parked


def test_a_members_answer_posted_in_its_leaders_session_reaches_it():
    with playing(["I7"], **TWO_TEAMS) as story:
        story.leader_invites_member(member="aide", first_turn="calls GatedAction")
        story.everything_settles()
        assert story.world.observe_session("aide").parked_status == "awaiting_permission"
        story.user_answers_confirmation(session="aide", decision="confirms", posted_to_leader=True)
        story.everything_settles()
        aide = story.world.observe_session("aide")
    assert aide.parked_status == "idle"
    assert aide.last_reply_end() == "completed"


def _sessions_of_every_agent() -> dict[str, set[str]]:
    stage = Stage.shared()
    return {
        name: {
            record.id for record in stage.loop.run_until_complete(
                stage.storage.list_sessions(stage.user_id, member.agent_id),
            )
        }
        for name, member in stage.members.items()
    }


def test_a_story_leaves_only_the_primary_sessions_behind():
    """Each story deletes the sessions it opened and those agentscope's
    ``AgentInvite`` minted, and no other: the next story sees none of them."""
    with playing(["I2", "I10"], **TWO_TEAMS) as story:
        story.leader_invites_member(member="aide", first_turn="calls GatedAction")
        story.leader_invites_worker(worker_first_turn=FAILS)
        story.everything_settles()
        assert set(story.world.sessions) >= {"leader", "worker", "aide", "chief"}
        during = _sessions_of_every_agent()
    primary = {name: {member.session_id} for name, member in Stage.shared().members.items()}
    assert all(during[name] > primary[name] for name in ("leader", "worker", "chief", "aide"))
    assert _sessions_of_every_agent() == primary


def test_a_session_agentscope_made_outside_any_team_is_deleted_too():
    """A session no team holds (deleting the story's leader does not take it
    with it) is found among the sessions agentscope made, and deleted."""
    stage = Stage.shared()
    solo = stage.members["solo"]
    with playing(["I1"]) as story:
        world = story.world
        primary = world.setup(stage.storage.get_session(stage.user_id, solo.agent_id, solo.session_id))
        world.setup(world.app.storage.upsert_session(
            user_id=stage.user_id, agent_id=solo.agent_id, config=primary.config,
        ))
        assert len(_sessions_of_every_agent()["solo"]) == 3  # primary, the story's, the stray one
    assert _sessions_of_every_agent()["solo"] == {solo.session_id}

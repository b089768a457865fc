"""Teams: a leader invites a member through agentscope's own
``AgentInvite``, which mints the member's session in the team and delivers
the task into its inbox."""
from __future__ import annotations

from agentscope.message import UserMsg

from harness.world.cast import TEAM_OF, WORKER

from .story_rule import Chosen, Where, story_rule
from .vocabulary import turn_in_words


def _invite(machine, member: str, first_turn: str) -> None:
    """The user asks ``member``'s leader for help, and the leader's model
    invites ``member`` (whose model will do ``first_turn``)."""
    machine.script(member, first_turn)
    machine.world.invite(member, UserMsg(name="user", content="get help"))


class TeamRules:
    """The leader invites its worker."""

    @story_rule(
        when=lambda self: WORKER in self.cast
        and WORKER not in self.world.sessions
        and not self.awaiting("leader"),
        worker_first_turn=Chosen("turns"),
        says=lambda worker_first_turn: (
            "The user asks the leader for help; the leader's model calls AgentInvite, "
            "which creates the worker's session and delivers the task to its inbox. "
            f"The worker's model, when it runs, {turn_in_words(worker_first_turn)}."
        ),
    )
    def leader_invites_worker(self, worker_first_turn: str) -> None:
        """The user asks the leader for help; the leader's model calls
        ``AgentInvite``, which mints the worker's session and delivers the
        task into its inbox (queuing a wake-up)."""
        _invite(self, WORKER, worker_first_turn)


class SeveralTeams:
    """Either leader invites any of its members (machines with
    ``several_teams``)."""

    @story_rule(
        when=lambda self: any(map(self.invitable, self.cast)),
        member=Where("invitable", opened=False),
        first_turn=Chosen("turns"),
        says=lambda member, first_turn: (
            f"The user asks the {TEAM_OF.get(member, 'leader')} for help; its model calls "
            f"AgentInvite for the {member}, which creates the {member}'s session in that "
            f"team and delivers the task to its inbox. The {member}'s model, when it "
            f"runs, {turn_in_words(first_turn)}."
        ),
    )
    def leader_invites_member(self, member: str, first_turn: str) -> None:
        """The user asks a team's leader for help; its model calls
        ``AgentInvite`` for ``member``, which mints the member's session in
        that team and delivers the task into its inbox. With several teams
        and workers, members of both teams work, fail and report at once."""
        _invite(self, member, first_turn)

"""Who is in a story: the agents every world has, and their teams.

The leader leads a team (the "crew") whose members it may invite; the solo
agent works alone. Stories with several teams and workers at once also
have the helper (a second crew member) and the chief's team (the "band",
with its aide).
"""
from __future__ import annotations

from collections.abc import Callable

from fakes.model import CallTool, Text

LEADER, WORKER, SOLO = "leader", "worker", "solo"
HELPER, CHIEF, AIDE = "helper", "chief", "aide"

#: The leader each invitable agent works for once invited.
TEAM_OF = {WORKER: LEADER, HELPER: LEADER, AIDE: CHIEF}

#: What each invitable agent tells a leader about itself.
INVITE_DESCRIPTIONS = {
    WORKER: "Does gated chores.",
    HELPER: "Does gated chores too.",
    AIDE: "Assists the chief.",
}


async def open_cast(app, meet: Callable[[str, str], None], with_chief: bool) -> None:
    """Open the leader's and the solo session and the leader's team (and,
    ``with_chief``, the chief's session and team) in ``app``, telling
    ``meet(alias, session_id)`` of each session; members report to their
    leader when their script runs out."""
    for member, leader in TEAM_OF.items():
        app.script(member).when_empty = (
            CallTool("TeamSay", {"content": "my part is done", "to": leader}),
            Text(f"reported to the {leader}"),
        )
    for alias in (LEADER, SOLO):
        meet(alias, await app.open_session(alias))
    await app.make_team(LEADER)
    if with_chief:
        meet(CHIEF, await app.open_session(CHIEF))
        await app.make_team(CHIEF, team_name="band")

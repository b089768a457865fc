"""Who is in a story: the agents every world has, and their teams.

The leader leads a team (the "crew") whose members it may invite; the solo
agent works alone. Stories with several teams and workers at once also
have the helper (a second crew member) and the chief's team (the "band",
with its aide).
"""
from __future__ import annotations

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

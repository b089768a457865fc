"""What the harness sees of the world at one quiescent moment.

An :class:`Observation` is plain data: per session, the events it published,
the payloads pushed into its inbox, what is still queued, whether its inbox
is registered as consumed, whether a run is alive, who holds its lock, and
its persisted parked status and context. Invariants are functions of it, so
a test can build one by hand to show an invariant firing.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SessionView:
    """One session as seen at a quiescent moment."""

    alias: str
    session_id: str
    events: list[dict] = field(default_factory=list)
    inbox_pushes: list[dict] = field(default_factory=list)
    queued: list[dict] = field(default_factory=list)
    consumer_registered: bool = False
    run_alive: bool = False
    lock_holders: set[str] = field(default_factory=set)
    #: Whether the bus still holds a live lease on the session lock.
    lock_leased: bool = False
    parked_status: str = "idle"
    awaiting_call_ids: list[str] = field(default_factory=list)
    resolved_call_ids: list[str] = field(default_factory=list)
    context_hints: list[str] = field(default_factory=list)
    context_user_texts: list[str] = field(default_factory=list)
    #: The notes of the desk tool calls that ran for this session.
    tool_runs: list[str] = field(default_factory=list)

    def last_reply_end(self) -> str | None:
        """``finished_reason`` of the last ``REPLY_END`` event, if any."""
        ends = [e for e in self.events if e.get("type") == "REPLY_END"]
        return ends[-1].get("finished_reason") if ends else None


@dataclass
class Observation:
    """Every session, and whether the world as a whole has settled."""

    sessions: dict[str, SessionView] = field(default_factory=dict)
    settled: bool = False
    #: Settled with the clock moved past every lease and TTL: whatever is
    #: still waiting now waits forever.
    past_leases: bool = False
    #: Whether agentscope's wake-up dispatcher loop is still running.
    dispatcher_alive: bool = True

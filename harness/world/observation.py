"""What the harness sees of the world at one quiescent moment.

An :class:`Observation` is plain data: per session, the events it published,
the payloads pushed into its inbox, what is still queued, whether its inbox
is registered as consumed, whether a run is alive, who holds its lock, and
its persisted parked status and context. Invariants are functions of it, so
a test can build one by hand to show an invariant firing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: The events a reply parks on, one per call that waits.
REQUEST_EVENTS = ("REQUIRE_USER_CONFIRM", "REQUIRE_EXTERNAL_EXECUTION")


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
    #: Whether storage holds the session's record.
    stored: bool = True
    awaiting_call_ids: list[str] = field(default_factory=list)
    resolved_call_ids: list[str] = field(default_factory=list)
    context_hints: list[str] = field(default_factory=list)
    context_user_texts: list[str] = field(default_factory=list)
    #: The output of every tool result in the agent's context, as text.
    context_tool_outputs: list[str] = field(default_factory=list)
    #: The notes of the desk tool calls that ran for this session.
    tool_runs: list[str] = field(default_factory=list)

    def last_reply_end(self) -> str | None:
        """``finished_reason`` of the last ``REPLY_END`` event, if any."""
        ends = [e for e in self.events if e.get("type") == "REPLY_END"]
        return ends[-1].get("finished_reason") if ends else None

    def open_reply_id(self) -> str | None:
        """The reply in progress or parked: the most recently started
        reply with no ``REPLY_END`` yet. A continuation ``REPLY_START``
        (same reply id) of a parked reply makes it the newest again; one of
        a reply that already ended (agentscope publishes those when a
        resume finds nothing to resume) reopens nothing."""
        started: list[str] = []
        ended: set[str] = set()
        for event in self.events:
            reply_id = event.get("reply_id")
            if event.get("type") == "REPLY_START" and reply_id not in ended:
                started = [r for r in started if r != reply_id] + [reply_id]
            elif event.get("type") == "REPLY_END":
                ended.add(reply_id)
                started = [r for r in started if r != reply_id]
        return started[-1] if started else None

    def requested_call_ids(self, reply_id: str | None) -> list[str]:
        """Ids of the calls ``reply_id`` asked the user or an external
        system about (``REQUIRE_USER_CONFIRM`` / ``_EXTERNAL_EXECUTION``)."""
        return [
            call["id"]
            for event in self.events
            if event.get("type") in REQUEST_EVENTS and event.get("reply_id") == reply_id
            for call in event.get("tool_calls", [])
        ]

    def call_ids_with_results(self) -> set[str]:
        """Ids of the calls whose result was published (``TOOL_RESULT_END``:
        run, denied, interrupted or an external result)."""
        return {
            e.get("tool_call_id")
            for e in self.events
            if e.get("type") == "TOOL_RESULT_END"
        }

    def reply_ends(self, since: int = 0) -> list[tuple[int, dict]]:
        """``REPLY_END`` events from position ``since`` of the log on,
        with their positions."""
        return [
            (n, e)
            for n, e in enumerate(self.events)
            if n >= since and e.get("type") == "REPLY_END"
        ]


@dataclass
class Observation:
    """Every session, and whether the world as a whole has settled."""

    sessions: dict[str, SessionView] = field(default_factory=dict)
    #: Sessions the user deleted, as they are now.
    deleted: list[SessionView] = field(default_factory=list)
    settled: bool = False
    #: Settled with the clock moved past every lease and TTL: whatever is
    #: still waiting now waits forever.
    past_leases: bool = False
    #: Whether agentscope's wake-up dispatcher loop is still running.
    dispatcher_alive: bool = True

"""The questions a rule asks before it acts: can this session take a
message, does it wait for a confirmation, can its run crash...

Each is a method of the machine (rules name them in ``Where(...)`` and
``when=``) and reads only what the world shows (:mod:`harness.world`'s
observe methods) and what the ledger recorded.
"""
from __future__ import annotations

from harness.world.cast import TEAM_OF
from harness.world.observation import REQUEST_EVENTS


class Questions:
    """Mixed into the machine: questions about the story's sessions."""

    def open_request(self, session: str, kind: str) -> dict | None:
        """The newest request of ``kind`` in the session's current parked
        reply whose calls nobody answered (a turn with several calls asks
        once per call, and the user may answer them one at a time)."""
        events = self.world.published(session)
        requests = [(n, e) for n, e in enumerate(events) if e.get("type") in REQUEST_EVENTS]
        if not requests:
            return None
        last_request, newest = requests[-1]
        current = newest.get("reply_id")
        if any(
            e.get("type") == "REPLY_END" and e.get("reply_id") == current
            for e in events[last_request:]
        ):
            return None  # that reply has ended (interrupted, say): its card is gone
        decided = set(self.ledger.decisions.get(session, []))
        for _, event in reversed(requests):
            if event.get("reply_id") != current:
                return None
            calls = [c["id"] for c in event.get("tool_calls", [])]
            if event.get("type") == kind and calls and not set(calls) & decided:
                return event
        return None

    def asks_confirmation(self, session: str) -> bool:
        return self.open_request(session, "REQUIRE_USER_CONFIRM") is not None

    def awaits_result(self, session: str) -> bool:
        return self.open_request(session, "REQUIRE_EXTERNAL_EXECUTION") is not None

    def any_open(self, kind: str) -> bool:
        return any(self.open_request(s, kind) for s in self.world.sessions)

    def awaiting(self, session: str) -> bool:
        """Parked, or waiting for an answer to be applied. A new message
        to such a session is a different story (left out of the seed
        machine: agentscope's agent rejects it by design)."""
        if any(self.open_request(session, kind) for kind in REQUEST_EVENTS):
            return True
        if session not in self.world.sessions:
            return False
        return self.world.observe_session(session).parked_status != "idle"

    def exists(self, session: str) -> bool:
        return session in self.world.sessions

    def has_run(self, session: str) -> bool:
        return self.world.run_of(session) is not None

    def any_run(self) -> bool:
        return any(self.world.run_of(s) is not None for s in self.world.sessions)

    def takes_messages(self, session: str) -> bool:
        return session in self.messaged and not self.awaiting(session)

    def takes_messages_with_no_run(self, session: str) -> bool:
        """The user can message it and no run of it is alive: a delivery
        now finds no consumer and owes a wake-up."""
        return self.takes_messages(session) and not self.has_run(session)

    def writable_while_parked(self, session: str) -> bool:
        return session in self.messaged and session in self.world.sessions and self.awaiting(session)

    def interruptible(self, session: str) -> bool:
        """A session the user talks to directly (a worker's stop button
        is not the user's: its card shows in the leader's session, whose
        interrupt agentscope does not route on) with a run alive
        (streaming, or at its turn tail) or parked: there is something for
        the stop button to stop."""
        return session in self.messaged and (self.has_run(session) or self.awaiting(session))

    def deletable(self, session: str) -> bool:
        """A session of the story that leads no team and works for none."""
        return session in self.world.sessions and session not in TEAM_OF and session not in TEAM_OF.values()

    def crashable(self, session: str) -> bool:
        """A live run, stopped at a bus operation with all its helpers."""
        return self.world.can_crash(session)

    def invitable(self, member: str) -> bool:
        """Not invited yet, and its leader is free to ask for help."""
        leader = TEAM_OF.get(member)
        return (
            leader is not None
            and member in self.cast
            and member not in self.world.sessions
            and leader in self.world.sessions
            and not self.awaiting(leader)
        )

    def has_running_job(self, session: str) -> bool:
        return bool(self.world.running_jobs(session))

"""Moves aimed at one session's inbox hand-off: a delivery, the session's
run or the wake-up dispatcher goes on by one of its operations, so that a
rule can interleave them one at a time (on Redis each is a round trip);
and the session's run going on into its clean-up, where a stop lands after
the turn tail. Part of the :class:`~.world.World` façade.
"""
from __future__ import annotations

from agentscope.app.message_bus import MessageBusKeys

from harness.kernel.interleaver import Op

from .surface import INBOX


class HandOffSteps:
    """Step-by-step moves of a session's hand-off parties, as
    :class:`~.world.World` offers them."""

    def inbox_pushes(self, alias: str) -> list[str]:
        """What was pushed into ``alias``'s inbox, in order, as the trace
        describes each payload (a turn-tail check's put-backs included)."""
        inbox = MessageBusKeys.inbox(self.sessions[alias]) if alias in self.sessions else None
        return [e.detail for e in self.interleaver.trace.entries if e.op == "queue_push" and e.key == inbox]

    def run_to_clean_up(self, alias: str) -> None:
        """``alias``'s run goes on until its clean-up saves its state (held
        just before the save trims the session's event log: the run waits
        for that save), ends, or must wait for another party."""
        run = self.run_of(alias)
        if run is not None:
            trim = Op("log_trim", MessageBusKeys.session_events(self.sessions[alias]))
            self.actors.finish(run, stop=self.actors.held_at(trim))

    def hand_off_step(self, alias: str, party: str, node: int = 0) -> bool:
        """One move of an interleaving aimed at ``alias``'s inbox hand-off;
        whether ``party`` could move. ``delivery``: the oldest delivery to
        ``alias`` that can move does its next bus operation. ``run``
        (``alias``'s run) or ``dispatcher`` (node ``node``'s wake-up
        dispatcher): it goes on until it has done one bus operation of the
        hand-off (on ``alias``'s inbox, inbox lock, consumer registration
        or session lock, or the wake-up queue), ends or must wait."""
        movable = {a.index for a in self.actors.movable()}
        if party == "delivery":
            candidates = [d for d in self._delivering.values() if not d.done and self._acting_for.get(d) == alias]
        else:
            candidates = [self.run_of(alias) if party == "run" else self.dispatcher(node)]
        actor = next((a for a in candidates if a is not None and a.index in movable), None)
        if actor is None or alias not in self.sessions:
            return False
        if party == "delivery":
            self.actors.step(actor)
            return True
        session_id = self.sessions[alias]
        keys = {
            MessageBusKeys.inbox(session_id), MessageBusKeys.session_lock(session_id),
            MessageBusKeys.wakeup_queue(),
            *(key(session_id) for key in (INBOX.inbox_lock_key, INBOX.consumer_key) if key is not None),
        }
        # A registration's operation names its field too (``key#field``).
        self.actors.step_past(actor, lambda op: op.key.split("#")[0] in keys)
        return True

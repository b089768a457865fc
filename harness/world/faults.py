"""The faults a story injects into the world: a run's process dies, a
node dies, a bus operation fails, a session's storage keeps failing. Part of the :class:`~.world.World`
façade (its attributes: the interleaver, the nodes, the bus inspector,
the Redis link)."""
from __future__ import annotations

from collections.abc import Callable

#: How often one session's failing storage may be tried before the world
#: counts as busier than one at rest (I17): a trigger that can never be
#: dispatched is given up, not retried for ever.
STORAGE_TRIES = 50


class WorldFaults:
    """Crashes and failures, as :class:`~.world.World` offers them."""

    def crash(self, alias: str) -> None:
        """The process running ``alias``'s run dies mid-flight: no cleanup
        runs, its leases go unrenewed until they expire, and the rest of
        the world (the dispatcher, producers, other runs) carries on."""
        run = self.run_of(alias)
        doomed = self.interleaver.crash(run)
        self.nodes[run.node].app.registry.process_died(run.task)
        self._inspector.process_died([r.task for r in doomed])

    def crash_node(self, node: int) -> set[str]:
        """Node ``node``'s process dies: every task of it stops where it
        is, its connections drop (the server forgets its subscriptions),
        its leases run out unrenewed; the other nodes carry on. Returns
        the sessions it was running or delivering for."""
        doomed = self.interleaver.crash_node(node)
        self.nodes[node].alive = False
        touched = {
            alias for alias, session_id in self.sessions.items()
            if self.nodes[node].app.registry.get(session_id) is not None
        }
        touched |= {self._acting_for[r] for r in doomed if r in self._acting_for}
        for record in doomed:
            self.nodes[node].app.registry.process_died(record.task)
        self._link.freeze(node)
        self._inspector.process_died([r.task for r in doomed])
        return touched

    def live_nodes(self) -> list[int]:
        """The nodes whose process still runs."""
        return [n.index for n in self.nodes if n.alive]

    def fail_next(self, alias: str, kind: str, operation: str, key_of: Callable[[str], str]) -> None:
        """The next ``operation`` on ``alias``'s key ``key_of(session id)``
        fails, whoever makes it: ``before`` the bus applies it, ``after``
        (its reply is lost), the lease's ``renewal`` (now) or ``release``
        (next time), or its next waiter is ``overtake``-n."""
        key = key_of(self.sessions[alias])
        staged = {"renewal": self._inspector.renewal_fails, "release": self._inspector.release_fails,
                  "overtake": self._inspector.waiter_overtaken}
        if kind in staged:
            staged[kind](key)
        else:
            self.bus.fail_next(operation, key, after=kind == "after")

    def can_crash(self, alias: str) -> bool:
        """A live run, stopped at a bus operation with all its helpers."""
        run = self.run_of(alias)
        if run is None or not run.held:
            return False
        return all(r.held for r in self.actors.working_for(run))

    def fail_storage(self, alias: str) -> None:
        """From now on every storage call naming ``alias``'s session fails
        (a corrupt row, a lost shard): a trigger for it can never be
        dispatched."""
        self.app.storage.failing.add(self.sessions[alias])

    def too_busy(self) -> str | None:
        """Why the world is busier than one at rest could be, beyond its
        bus operations: a session's failing storage tried again and again."""
        tried = self.app.storage.fired.most_common(1)
        if tried and tried[0][1] > STORAGE_TRIES:
            session_id, count = tried[0]
            return (f"the failing storage of session {session_id} was tried {count} times "
                    f"(more than {STORAGE_TRIES}): a trigger that can never be dispatched is retried for ever")
        return None

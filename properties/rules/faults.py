"""Faults: a run's process crashes, a bus operation fails, a session's
storage keeps failing. Each rule
exists only on machines whose flag turns it on. A crash touches its session
at once; a bus fault only once it fires (the machine asks the world which
sessions fired faults touched)."""
from __future__ import annotations

from hypothesis import strategies as st

from .story_rule import OnNode, Where, story_rule
from .vocabulary import BUS_FAULT_WORDS, BUS_FAULTS


class Crashes:
    """A run's process dies (machines with ``crashes``)."""

    @story_rule(
        when=lambda self: any(map(self.crashable, self.cast)),
        session=Where("crashable"),
        says=lambda session: (
            f"The process running {session}'s run dies (no cleanup runs; its "
            "session lock and inbox registration stay until their leases expire)."
        ),
    )
    def process_crashes(self, session: str) -> None:
        """The process running the session's run dies (killed for memory,
        a redeploy): no cleanup runs. Its session lock and inbox-consumer
        registration stay until their leases run out; the dispatcher and
        every producer, in other processes, carry on."""
        self.world.crash(session)
        self.ledger.faults.add(session)
        self.ledger.crashed.add(session)


class NodeCrashes:
    """A whole node dies (machines with ``crashes``, in worlds of several
    nodes)."""

    @story_rule(
        when=lambda self: len(self.world.live_nodes()) > 1,
        node=OnNode(),
        says=lambda node=None: (
            f"Node {node}'s process dies: its runs, dispatchers and deliveries stop "
            "where they are, its connections drop, its leases run out unrenewed."
        ),
    )
    def node_dies(self, node: int | None = None) -> None:
        """A node's process dies (a redeploy, the OOM killer); the other
        nodes carry on. The sessions it was working for are touched by a
        fault."""
        touched = self.world.crash_node(node or 0)
        self.ledger.faults |= touched
        self.ledger.crashed |= touched


class BusFaults:
    """A bus operation fails (machines with ``bus_faults``)."""

    @story_rule(
        operation=st.sampled_from(sorted(BUS_FAULTS)),
        session=Where("exists"),
        says=lambda operation, session: (
            "The wake-up dispatcher's subscription drops on its next message "
            "(the connection fails)."
            if BUS_FAULTS[operation][1] == "subscription"
            else f"The next `{operation}` on {session}'s key "
            f"{BUS_FAULT_WORDS[BUS_FAULTS[operation][0]]}."
        ),
    )
    def bus_operation_fails(self, operation: str, session: str) -> None:
        """The next time anyone makes ``operation`` on the session's key,
        the bus fails it (a dropped connection, a failover)."""
        kind, name, key_of = BUS_FAULTS[operation]
        self.world.fail_next(session, kind, name, key_of)


class StorageFaults:
    """A session's storage keeps failing (machines with ``storage_faults``)."""

    @story_rule(
        session=Where("exists"),
        says=lambda session: (
            f"Every storage call for {session}'s session fails from now on (a corrupt row, "
            "a lost shard): a trigger for it can never be dispatched."
        ),
    )
    def storage_keeps_failing(self, session: str) -> None:
        """A storage error that stays, on one session: its runs, its
        endpoint calls and the dispatcher's look-up of it fail, while the
        other sessions carry on. The session is touched once a call fails."""
        self.world.fail_storage(session)
        self.ledger.broken_storage.add(session)

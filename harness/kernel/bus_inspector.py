"""What the harness needs from a bus beyond agentscope's ``MessageBus``.

Invariants read state the ``MessageBus`` interface does not expose without
changing it (what is queued, who holds a lease), and a crash needs the bus
to stop renewing a dead process' leases. A bus that offers both satisfies
:class:`BusInspector`; the harness refuses any other bus up front instead of
silently seeing an empty one. :class:`fakes.bus.VirtualRedisBus` is one.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class BusInspector(Protocol):
    """Read-only views of a bus's state, and the faults only the bus can
    stage: a process's death, a failed lease renewal or release."""

    def peek_queue(self, key: str) -> list[dict]:
        """Payloads queued at ``key`` (expired ones excluded)."""

    def peek_registry(self, namespace: str) -> dict[str, str]:
        """A registry namespace's live fields."""

    def lock_holder(self, key: str) -> Any:
        """Who holds ``key`` (anything truthy), or ``None`` when free or
        expired."""

    def process_died(self, tasks: list[Any]) -> None:
        """The process running ``tasks`` died: nobody renews their leases
        any more."""

    def renewal_fails(self, key: str) -> bool:
        """The heartbeat of ``key``'s live lease fails: the lease lapses
        under its holder. Whether there was a lease to fail."""

    def release_fails(self, key: str) -> None:
        """The next release of ``key`` fails: the lock stays until its
        lease runs out."""

    def waiter_overtaken(self, key: str) -> None:
        """The next waiter woken on ``key`` polls once before it retries,
        so another acquirer may take the lock first."""

    faults_fired: list[str]
    """Keys on which a lease fault (renewal, release) fired."""


def inspector_of(bus: object) -> BusInspector:
    """``bus`` itself, checked: a bus the harness cannot inspect is refused
    with a message saying what it lacks."""
    if not isinstance(bus, BusInspector):
        missing = [
            name
            for name in (
                "peek_queue", "peek_registry", "lock_holder", "process_died",
                "renewal_fails", "release_fails", "waiter_overtaken",
            )
            if not callable(getattr(bus, name, None))
        ]
        raise TypeError(
            f"{type(bus).__name__} cannot be inspected by the harness "
            f"(it lacks {', '.join(missing)}); see harness.kernel.bus_inspector",
        )
    return bus

"""The reference fixes: agentscope patched the way this project proposes.

The one place in this project that patches agentscope, and only when asked
(``pytest --reference-fix``, ``hitl-harness ... --with-fix``). Each fix is a
:class:`~reference_fix.source_patch.SourcePatch` with the releases it
targets and the properties it makes hold there:

- :mod:`reference_fix.parked_continuation` (2.0.7, 2.0.8): the reported
  parked-inbox bug (I1, I2);
- :mod:`reference_fix.dispatcher_survival` (2.0.7–2.0.11): the dispatcher
  loop ending on one failed bus operation (I13);
- :mod:`reference_fix.stop_reaches_slow_tools` (2.0.7–2.0.11): a tool left
  running, unowned, when its reply is stopped inside the offload window
  (I14);
- :mod:`reference_fix.resubscribe` (2.0.7–2.0.11; four patches, one per
  dispatcher loop): a dropped pub/sub subscription ending the wake-up
  dispatcher and the cancel dispatcher's loops for good (I13, F4b);
- :mod:`reference_fix.inbox_sweeper` (2.0.7–2.0.11; four patches): what a
  crashed run's producers deferred to it, or the trigger popped for it,
  waiting in its inbox for good once its leases expire (I11, F5).

:func:`apply` applies every fix that targets the installed agentscope.
"""
from __future__ import annotations

from . import (
    dispatcher_survival,
    inbox_sweeper,
    parked_continuation,
    resubscribe,
    stop_reaches_slow_tools,
)
from .source_patch import FixRefused, SourcePatch

#: Every fix, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = (
    parked_continuation.PATCH,
    dispatcher_survival.PATCH,
    stop_reaches_slow_tools.PATCH,
    *resubscribe.PATCHES,
    *inbox_sweeper.PATCHES,
)


def applicable() -> list[SourcePatch]:
    """The fixes that target the installed agentscope."""
    return [p for p in PATCHES if p.refusal() is None]


def refusal() -> str | None:
    """Why no fix applies to the installed agentscope (None if one does)."""
    if applicable():
        return None
    return "; ".join(p.refusal() or "" for p in PATCHES)


def apply() -> list[SourcePatch]:
    """Apply every fix that targets the installed agentscope; raises
    :class:`FixRefused` (saying why for each) when none does."""
    why = refusal()
    if why is not None:
        raise FixRefused(why)
    chosen = applicable()
    for patch in chosen:
        patch.apply()
    return chosen


def remove() -> None:
    """Undo :func:`apply`, the last applied first."""
    for patch in reversed(PATCHES):
        patch.remove()


def is_applied() -> bool:
    """Whether any fix is in effect."""
    return any(p.is_applied() for p in PATCHES)


def applied() -> list[SourcePatch]:
    """The fixes in effect."""
    return [p for p in PATCHES if p.is_applied()]


def describe(patches=PATCHES) -> str:
    """One line per fix: name, what it does, where, what it covers."""
    return "\n".join(
        f"{p.name}: {p.what} (agentscope {', '.join(p.targets)}; covers {', '.join(p.covers)})"
        for p in patches
    )


__all__ = [
    "FixRefused",
    "PATCHES",
    "SourcePatch",
    "applicable",
    "applied",
    "apply",
    "describe",
    "is_applied",
    "refusal",
    "remove",
]

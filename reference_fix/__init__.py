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
- :mod:`reference_fix.stops_in_turn_tail` (2.0.7–2.0.11): a stop landing in
  a run's turn tail or clean-up, which lost the stop after parking (I9),
  what the run consumed (I5), or the parked call itself (I7);
- :mod:`reference_fix.message_while_parked` (2.0.7–2.0.11): a message to a
  session parked on a pending call, accepted and then dropped with an
  error; the chat endpoint refuses it (409), and a run that still meets
  one (a channel's ``message`` trigger) keeps it for the resume (I8).
  Three patches that apply together (``ChatService.run``, the chat route,
  ``_run_impl``), one diff;
- :mod:`reference_fix.resubscribe` (2.0.7–2.0.11; four patches, one per
  dispatcher loop): a dropped pub/sub subscription ending the wake-up
  dispatcher and the cancel dispatcher's loops for good (I13, F4b);
- :mod:`reference_fix.inbox_sweeper` (2.0.7–2.0.11; four patches): what a
  crashed run's producers deferred to it, or the trigger popped for it,
  waiting in its inbox for good once its leases expire (I11, F5).

A fix of several patches ships one diff per release (:data:`FIXES` groups
them; :mod:`reference_fix.diffs` writes them).

:func:`apply` applies every fix that targets the installed agentscope.
"""
from __future__ import annotations

from . import (
    dispatcher_survival,
    inbox_sweeper,
    message_while_parked,
    parked_continuation,
    resubscribe,
    stop_reaches_slow_tools,
    stops_in_turn_tail,
)
from .source_patch import FixRefused, SourcePatch

#: Every fix by the name its diff is shipped under, each one or more
#: patches, in the order they are applied.
FIXES: dict[str, tuple[SourcePatch, ...]] = {
    "parked-continuation": (parked_continuation.PATCH,),
    "dispatcher-survival": (dispatcher_survival.PATCH,),
    "stop-reaches-slow-tools": (stop_reaches_slow_tools.PATCH,),
    "stops-in-turn-tail": (stops_in_turn_tail.PATCH, stops_in_turn_tail.PATCH_WITHOUT_NAMING),
    "message-while-parked": message_while_parked.PATCHES,
    "resubscribe": resubscribe.PATCHES,
    "inbox-sweeper": inbox_sweeper.PATCHES,
}

#: Every patch, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = tuple(p for fix in FIXES.values() for p in fix)


def applicable() -> list[SourcePatch]:
    """The fixes that target the installed agentscope."""
    return [p for p in PATCHES if p.refusal() is None]


def refusal() -> str | None:
    """Why no fix applies to the installed agentscope, in one line (None
    if one does)."""
    if applicable():
        return None
    import agentscope  # pylint: disable=import-outside-toplevel

    return _refusal(agentscope.__version__)


def _refusal(version: str) -> str:
    targeted = [p for p in PATCHES if version in p.targets]
    if targeted:  # the release is one the fixes know, its code is not
        return "; ".join(p.refusal() or "" for p in targeted)
    known = sorted({t for p in PATCHES for t in p.targets}, key=_release_order)
    return f"no reference fix was written for agentscope {version} (the fixes target {', '.join(known)})"


def _release_order(version: str) -> tuple:
    from packaging.version import Version  # pylint: disable=import-outside-toplevel

    return (Version(version),)


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


def _reach(patches: tuple[SourcePatch, ...]) -> tuple[list[str], list[str]]:
    """The releases a fix's patches target and the properties they cover."""
    targets = sorted({t for p in patches for t in p.targets}, key=_release_order)
    covers = sorted({c for p in patches for c in p.covers}, key=lambda c: int(c[1:]))
    return targets, covers


def summary(indent: str = "") -> str:
    """One short line per fix: ``name (agentscope 2.0.7-2.0.11; covers I13)``."""
    lines = []
    for name, patches in FIXES.items():
        targets, covers = _reach(patches)
        releases = targets[0] if len(targets) == 1 else f"{targets[0]}-{targets[-1]}"
        lines.append(f"{indent}{name} (agentscope {releases}; covers {', '.join(covers)})")
    return "\n".join(lines)


def describe() -> str:
    """One line per fix: name, what its first patch does, the releases
    its patches target and what they cover."""
    lines = []
    for name, patches in FIXES.items():
        targets, covers = _reach(patches)
        together = len(patches) > 1 and len({p.targets for p in patches}) == 1  # not per-release variants
        parts = f" ({len(patches)} patches)" if together else ""
        lines.append(f"{name}: {patches[0].what}{parts} (agentscope {', '.join(targets)}; covers {', '.join(covers)})")
    return "\n".join(lines)


__all__ = [
    "FIXES",
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
    "summary",
]

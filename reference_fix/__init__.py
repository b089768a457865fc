"""The reference fixes: agentscope patched the way this project proposes.

The one place in this project that patches agentscope, and only when asked
(``pytest --hitl-reference-fix``, ``hitl-harness ... --with-fix``). Each fix is a
:class:`~reference_fix.source_patch.SourcePatch` with the releases it
targets and the properties it makes hold there:

- :mod:`reference_fix.parked_continuation` (2.0.7, 2.0.8): the reported
  parked-inbox bug (I1, I2);
- :mod:`reference_fix.dispatcher_survival` (2.0.7–2.0.11): the dispatcher
  loop ending on one failed bus operation (I13);
- :mod:`reference_fix.stop_reaches_slow_tools` (2.0.7–2.0.11): a tool left
  running, unowned, when its reply is stopped inside the offload window
  (I14);
- :mod:`reference_fix.clean_up_survives_stops` (2.0.7–2.0.11): cancels
  landing in a run's clean-up, or in its registration as its inbox's
  consumer, which lost what the run consumed (I5, I3) or the parked call
  itself (I7);
- :mod:`reference_fix.stop_after_parking` (2.0.7–2.0.11; four patches per
  release): a user's stop landing after the run parked (turn tail,
  clean-up, naming call), which was lost (I9), handed over in
  ``ChatService.run``; the interrupt route marks its cancel, so a shutdown
  or a delete is never taken for a stop;
- :mod:`reference_fix.message_while_parked` (2.0.7–2.0.11): a message to a
  session parked on a pending call, accepted and then dropped with an
  error; the chat endpoint refuses it (409), and a run that still meets
  one (a channel's ``message`` trigger) keeps it for the resume (I8).
  Three patches that apply together (``ChatService.run``, the chat route,
  ``_run_impl``), one diff;
- :mod:`reference_fix.resubscribe` (2.0.7–2.0.11; four patches, one per
  dispatcher loop): a dropped pub/sub subscription ending the wake-up
  dispatcher and the cancel dispatcher's loops for good (I13, F4b);
- :mod:`reference_fix.inbox_sweeper` (2.0.7–2.0.11; three patches): what
  a crashed process' producers left to its run, or the trigger popped for
  it, waiting in its inbox for good once its leases expire (I11, F5);
- :mod:`reference_fix.shutdown_keeps_triggers` (2.0.7–2.0.11; six
  patches): the triggers a graceful shutdown's wake-up dispatcher had
  drained or held in a backoff timer, dropped with it (F14, met by I16's
  search).
- :mod:`reference_fix.stale_decisions` (2.0.7–2.0.11): a decision for a
  tool call a stop had already closed, failed into the reply the agent
  is parked on next (I1, F16, met by I16's search);
- :mod:`reference_fix.lock_held_backoff` (2.0.7–2.0.11; three patches): a
  trigger re-queued ten times a second for as long as its session lock
  stays held (a failed release, a dead run's lease), every process
  draining on each re-queue (I17, F17);
- :mod:`reference_fix.drain_survives_stops` (2.0.7–2.0.11; two patches):
  a stop cutting an inbox drain short (a reasoning step's, the turn
  tail's), which lost what the bus had removed (I5, F11's mechanism);
- :mod:`reference_fix.publish_survives_stops` (2.0.7–2.0.11; two patches
  per release): a stopping reply's closing events, ``REPLY_END`` among
  them, dropped one by one by a stop re-armed into every publish (I9, I10,
  F11).

A fix of several patches ships one diff per release (:data:`FIXES` groups
them; :mod:`reference_fix.diffs` writes them).

:func:`apply` applies every fix that targets the installed agentscope,
each whole (every one of its patches for that release) or not at all: a
fix one of whose patches does not match the installed source (a modified
checkout, a fork) is refused, and :func:`apply` says which patch and why.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from . import (
    clean_up_survives_stops,
    dispatcher_survival,
    drain_survives_stops,
    inbox_sweeper,
    lock_held_backoff,
    message_while_parked,
    parked_continuation,
    publish_survives_stops,
    resubscribe,
    shutdown_keeps_triggers,
    stale_decisions,
    stop_after_parking,
    stop_reaches_slow_tools,
)
from .source_patch import FixRefused, SourcePatch

#: Every fix by the name its diff is shipped under, each one or more
#: patches, in the order they are applied.
FIXES: dict[str, tuple[SourcePatch, ...]] = {
    "parked-continuation": (parked_continuation.PATCH,),
    "dispatcher-survival": (dispatcher_survival.PATCH,),
    "stop-reaches-slow-tools": (stop_reaches_slow_tools.PATCH,),
    "clean-up-survives-stops": (clean_up_survives_stops.PATCH,),
    "stop-after-parking": stop_after_parking.PATCHES,
    "message-while-parked": message_while_parked.PATCHES,
    "resubscribe": resubscribe.PATCHES,
    "inbox-sweeper": inbox_sweeper.PATCHES,
    "shutdown-keeps-triggers": shutdown_keeps_triggers.PATCHES,
    "stale-decisions": (stale_decisions.PATCH,),
    "lock-held-backoff": lock_held_backoff.PATCHES,
    "drain-survives-stops": drain_survives_stops.PATCHES,
    "publish-survives-stops": publish_survives_stops.PATCHES,
}

#: Every patch, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = tuple(p for fix in FIXES.values() for p in fix)


@dataclass(frozen=True)
class Refusal:
    """A fix that targets the installed agentscope and is not applied: the
    first of its patches for this release that refused (its method), and
    why."""

    fix: str
    method: str
    reason: str

    def __str__(self) -> str:
        return f"{self.fix} refused: {self.method}: {self.reason}"


@dataclass(frozen=True)
class Outcome:
    """What :func:`apply` did: the fixes applied (each with its patches for
    this release, all of them applied) and those refused. Iterating it
    gives the patches applied, in order."""

    applied: dict[str, tuple[SourcePatch, ...]] = field(default_factory=dict)
    refused: tuple[Refusal, ...] = ()

    @property
    def fixes(self) -> list[str]:
        """The names of the fixes applied, in the order of :data:`FIXES`."""
        return list(self.applied)

    def __iter__(self) -> Iterator[SourcePatch]:
        return (p for patches in self.applied.values() for p in patches)

    def __len__(self) -> int:
        return sum(len(patches) for patches in self.applied.values())


#: What the last :func:`apply` did (None: none since the last :func:`remove`).
_OUTCOME: Outcome | None = None


def _installed_version() -> str:
    import agentscope  # pylint: disable=import-outside-toplevel

    return agentscope.__version__


def plan() -> Outcome:
    """Which fixes :func:`apply` would apply to the installed agentscope
    and which it refuses, from the installed source. A fix applies whole:
    every one of its patches that targets this release (a patch written
    for another release, a variant of the fix there, is left out), or
    none when one of them refuses (its text is not in the source)."""
    version = _installed_version()
    applies: dict[str, tuple[SourcePatch, ...]] = {}
    refusals = []
    for name, patches in FIXES.items():
        mine = tuple(p for p in patches if version in p.targets)
        why = next(((p.where, r) for p in mine if (r := p.refusal()) is not None), None)
        if why is not None:
            refusals.append(Refusal(name, *why))
        elif mine:
            applies[name] = mine
    return Outcome(applies, tuple(refusals))


def applicable() -> list[SourcePatch]:
    """The patches :func:`apply` would apply: every patch for this release
    of each fix that applies whole."""
    return list(plan())


def refused() -> tuple[Refusal, ...]:
    """The fixes that target the installed agentscope and would be refused
    (see :func:`plan`); after :func:`apply`, those it refused."""
    return _OUTCOME.refused if _OUTCOME is not None else plan().refused


def refusal() -> str | None:
    """Why no fix applies to the installed agentscope, in one line (None
    if one does)."""
    planned = plan()
    if planned.applied:
        return None
    return _refusal(_installed_version(), planned.refused)


def _refusal(version: str, refusals: tuple[Refusal, ...] = ()) -> str:
    if refusals:  # the release is one the fixes know, its code is not
        return "; ".join(map(str, refusals))
    known = sorted({t for p in PATCHES for t in p.targets}, key=_release_order)
    return f"no reference fix was written for agentscope {version} (the fixes target {', '.join(known)})"


def _release_order(version: str) -> tuple:
    from packaging.version import Version  # pylint: disable=import-outside-toplevel

    return (Version(version),)


def apply() -> Outcome:
    """Apply every fix that targets the installed agentscope, each whole
    or not at all (see :func:`plan`; a fix one of whose patches still
    refuses while it is applied is taken off again and refused). Returns
    and records what was applied and what refused; raises
    :class:`FixRefused` (saying why for each) when no fix applies."""
    global _OUTCOME  # pylint: disable=global-statement
    planned = plan()
    if not planned.applied:
        raise FixRefused(_refusal(_installed_version(), planned.refused))
    applied: dict[str, tuple[SourcePatch, ...]] = {}
    refusals = list(planned.refused)
    for name, patches in planned.applied.items():
        done: list[SourcePatch] = []
        try:
            for patch in patches:
                if not patch.is_applied():
                    patch.apply()
                    done.append(patch)
        except FixRefused as refused_here:
            for patch_done in reversed(done):
                patch_done.remove()
            refusals.append(Refusal(name, patch.where, str(refused_here)))
            continue
        applied[name] = patches
    outcome = Outcome(applied, tuple(refusals))
    if not applied:
        raise FixRefused(_refusal(_installed_version(), outcome.refused))
    _OUTCOME = outcome
    return outcome


def remove() -> None:
    """Undo :func:`apply`, the last applied first."""
    global _OUTCOME  # pylint: disable=global-statement
    for patch in reversed([p for patches in FIXES.values() for p in patches]):
        patch.remove()
    _OUTCOME = None


def is_applied() -> bool:
    """Whether any fix is in effect."""
    return any(p.is_applied() for p in PATCHES)


def applied() -> list[SourcePatch]:
    """The fixes in effect."""
    return [p for p in PATCHES if p.is_applied()]


def fixes_in_effect() -> list[str]:
    """The names of the fixes in effect, in the order of :data:`FIXES` (what
    a story's id covers)."""
    return [name for name, patches in FIXES.items() if any(p.is_applied() for p in patches)]


def status() -> list[str]:
    """What is in effect, for a report's header: ``ON (name, ...)`` naming
    the fixes in effect (or ``off``), then one line per fix the last
    :func:`apply` refused, ``name refused: Class.method: why``."""
    names = fixes_in_effect()
    lines = [f"ON ({', '.join(names)})" if names else "off"]
    if _OUTCOME is not None:
        lines += map(str, _OUTCOME.refused)
    return lines


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
    "Outcome",
    "PATCHES",
    "Refusal",
    "SourcePatch",
    "applicable",
    "applied",
    "apply",
    "describe",
    "is_applied",
    "plan",
    "refusal",
    "refused",
    "remove",
    "status",
    "summary",
]

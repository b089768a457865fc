"""Add the parked guard to ``ChatService._run_impl``'s in-run continuation.

The bug: at the turn tail, a run whose agent just parked on an ASKING or
SUBMITTED call finds a payload in its inbox, goes around with
``input_msg = None``, and ``Agent._check_incoming_event`` rejects the
``None`` with ``ValueError`` -> a spurious ``ReplyEnd(ERROR)`` and a false
failure reminder to the team leader.

The fix: when the agent is parked, leave the loop instead of going around.
It must *not* set ``released`` (the trap the bug report's closing note
names): the inbox still holds payloads and the run is still registered as
their consumer, so the ``finally`` has to run ``abandon_inbox_consumer``,
which drops the registration and enqueues a wake-up. The dispatcher's
``_skip_parked_wakeup`` drops that wake-up while the agent stays parked, and
the resuming run's first reasoning step drains the payloads.

One change, two forms: :func:`unified_diff` (for an upstream pull request)
and :func:`apply` (at run time), both produced from the same source text, so
they cannot drift apart. :func:`apply` refuses any release whose
``_run_impl`` does not contain the exact code the fix was written against.
"""
from __future__ import annotations

from .source_patch import FixRefused, SourcePatch

#: Releases whose continuation lacks the guard (2.0.9 added its own).
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8")

#: The properties this fix makes hold on those releases (proven by running
#: the property suite with ``--hitl-reference-fix``; see the README).
COVERS = ("I1", "I2")

UNGUARDED = """\
                    if not await has_pending_inbox_or_release(
                        self._message_bus,
                        session_id,
                    ):
                        released = True
                        break
                    input_msg = None
"""

GUARDED = """\
                    if not await has_pending_inbox_or_release(
                        self._message_bus,
                        session_id,
                    ):
                        released = True
                        break
                    # A parked agent cannot take a ``None`` turn:
                    # ``Agent._check_incoming_event`` rejects it. Leave
                    # the payloads queued for the resuming run, and do
                    # not mark the registration released: the
                    # ``finally`` hands it back through
                    # ``abandon_inbox_consumer``, whose wake-up
                    # ``_skip_parked_wakeup`` drops while parked.
                    if agent.state.has_awaiting_tool_calls(agent.name):
                        break
                    input_msg = None
"""

PATCH = SourcePatch(
    name="parked-continuation",
    module="agentscope.app._service._chat",
    cls="ChatService",
    method="_run_impl",
    before=UNGUARDED,
    after=GUARDED,
    targets=TARGET_RELEASES,
    covers=COVERS,
    what="a parked run leaves its continuation loop instead of taking a None turn",
)


def check_target(version: str, chat_source: str) -> str:
    """Accept ``version`` and its ``_chat.py`` text, or raise
    :class:`FixRefused` saying why; returns the version."""
    return PATCH.check_target(version, chat_source)


def refusal() -> str | None:
    """Why :func:`apply` would refuse the installed agentscope (or None)."""
    return PATCH.refusal()


def is_applied() -> bool:
    """Whether :func:`apply` is in effect."""
    return PATCH.is_applied()


def apply() -> None:
    """Patch ``ChatService._run_impl`` in this process; raises
    :class:`FixRefused` on any other release or source."""
    PATCH.apply()


def remove() -> None:
    """Undo :func:`apply`."""
    PATCH.remove()


def unified_diff() -> str:
    """The fix as a unified diff against the installed ``_chat.py``."""
    return PATCH.unified_diff()


__all__ = [
    "COVERS",
    "FixRefused",
    "GUARDED",
    "PATCH",
    "TARGET_RELEASES",
    "UNGUARDED",
    "apply",
    "check_target",
    "is_applied",
    "refusal",
    "remove",
    "unified_diff",
]

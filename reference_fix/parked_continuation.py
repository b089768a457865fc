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

import difflib
import inspect
import textwrap
from pathlib import Path

#: Releases whose continuation lacks the guard (2.0.9 added its own).
TARGET_RELEASES = ("2.0.7", "2.0.8")

#: The properties this fix makes hold on those releases (proven by running
#: the property suite with ``--reference-fix``; see the README).
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

_original_run_impl = None


class FixRefused(RuntimeError):
    """The installed agentscope is not a release this fix was written for."""


def _chat_module():
    from agentscope.app._service import _chat  # pylint: disable=import-outside-toplevel

    return _chat


def check_target(version: str, chat_source: str) -> str:
    """Accept ``version`` and its ``_chat.py`` text, or raise
    :class:`FixRefused` saying why; returns the version."""
    if version not in TARGET_RELEASES:
        raise FixRefused(
            f"the reference fix targets agentscope {', '.join(TARGET_RELEASES)};"
            f" this agentscope is {version}. Later releases carry their own "
            "guard: test them unpatched.",
        )
    if UNGUARDED not in chat_source:
        raise FixRefused(
            f"agentscope {version}'s _chat.py does not contain the unguarded "
            "continuation this fix replaces (a modified checkout?)",
        )
    return version


def _check_installed() -> str:
    import agentscope  # pylint: disable=import-outside-toplevel

    source_file = Path(inspect.getsourcefile(_chat_module()))
    try:
        return check_target(
            agentscope.__version__,
            source_file.read_text(encoding="utf-8"),
        )
    except FixRefused as refused:
        raise FixRefused(f"{refused} [{source_file}]") from None


def refusal() -> str | None:
    """Why :func:`apply` would refuse the installed agentscope (or None)."""
    try:
        _check_installed()
    except FixRefused as refused:
        return str(refused)
    return None


def is_applied() -> bool:
    """Whether :func:`apply` is in effect."""
    return _original_run_impl is not None


def apply() -> str:
    """Patch ``ChatService._run_impl`` in this process; returns the version.

    Raises :class:`FixRefused` on any other release or source."""
    global _original_run_impl  # pylint: disable=global-statement
    version = _check_installed()
    if is_applied():
        return version
    chat = _chat_module()
    original = chat.ChatService._run_impl
    method_source = inspect.getsource(original)
    if UNGUARDED not in method_source:
        raise FixRefused("the continuation code was not found in _run_impl")
    fixed = textwrap.dedent(method_source.replace(UNGUARDED, GUARDED, 1))
    # Keep tracebacks pointing at the right lines of _chat.py.
    fixed = "\n" * (original.__code__.co_firstlineno - 1) + fixed
    namespace = dict(vars(chat))
    code = compile(fixed, inspect.getsourcefile(chat), "exec")
    exec(code, namespace)  # pylint: disable=exec-used
    chat.ChatService._run_impl = namespace["_run_impl"]
    _original_run_impl = original
    return version


def remove() -> None:
    """Undo :func:`apply`."""
    global _original_run_impl  # pylint: disable=global-statement
    if _original_run_impl is not None:
        _chat_module().ChatService._run_impl = _original_run_impl
        _original_run_impl = None


def unified_diff() -> str:
    """The fix as a unified diff against the installed ``_chat.py``."""
    _check_installed()
    path = Path(inspect.getsourcefile(_chat_module()))
    before = path.read_text(encoding="utf-8")
    after = before.replace(UNGUARDED, GUARDED, 1)
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile="a/src/agentscope/app/_service/_chat.py",
            tofile="b/src/agentscope/app/_service/_chat.py",
        ),
    )

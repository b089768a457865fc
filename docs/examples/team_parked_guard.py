"""team_parked_guard: a team's interim mitigation of agentscope 2.0.8's
parked-inbox bug, as the original bug report describes it.

The bug: a run parked on a tool call that awaits the user (ASKING) or an
external result (SUBMITTED) finds a payload in its inbox at its turn tail
(``has_pending_inbox_or_release`` answers True), goes around its loop with
no input, and ``Agent.reply_stream(inputs=None)`` fails the reply with
``ReplyEnd(ERROR)`` (and a team leader gets a false failure reminder).

The mitigation, two wrappers:

- ``Agent.reply_stream``: any non-None input clears the session's parked
  mark; when the wrapped generator ends with tool calls awaiting the user
  or an external result, the session is marked parked.
- ``has_pending_inbox_or_release``, where ``ChatService``'s run loop calls
  it: for a parked session it answers False, so the run leaves its loop
  (``released``), and it hands the consumer registration back under the
  inbox lock, as the real function does when the inbox is empty. The
  payloads stay queued; the resuming run's ``InboxMiddleware`` drains them.

It is user code: it monkeypatches agentscope, on purpose. Put it under test
with ``hitl-harness gate 2.0.8 --patch docs/examples/team_parked_guard.py``
(``docs/patch-layer.md`` says what the harness finds in it).
"""
from __future__ import annotations

import functools

from agentscope.agent import Agent
from agentscope.app._service import _chat
from agentscope.app.message_bus import MessageBusKeys

#: Sessions whose last reply ended parked, in this process.
PARKED: set[str] = set()

#: What install() replaced, to put back.
_ORIGINALS: dict[str, object] = {}


def _guard_reply_stream(original):
    @functools.wraps(original)
    async def reply_stream(self, inputs=None, *args, **kwargs):
        session_id = self.state.session_id
        if inputs is not None:
            PARKED.discard(session_id)
        async for chunk in original(self, inputs, *args, **kwargs):
            yield chunk
        if self.state.has_awaiting_tool_calls(self.name):
            PARKED.add(session_id)

    return reply_stream


def _guard_has_pending(original):
    @functools.wraps(original)
    async def has_pending_inbox_or_release(bus, session_id):
        if session_id not in PARKED:
            return await original(bus, session_id)
        # Parked: release the run, leave the payloads queued for the resume,
        # and give the consumer registration back under the inbox lock.
        async with bus.acquire_lock(
            MessageBusKeys.inbox_lock(session_id),
            ttl_secs=MessageBusKeys.INBOX_LOCK_TTL_SECS,
        ):
            await bus.registry_del(
                MessageBusKeys.inbox_consumer(session_id),
                MessageBusKeys.INBOX_CONSUMER_FIELD,
            )
        return False

    return has_pending_inbox_or_release


def install() -> None:
    """Wrap both functions (once)."""
    if _ORIGINALS:
        return
    _ORIGINALS["reply_stream"] = Agent.reply_stream
    _ORIGINALS["has_pending_inbox_or_release"] = _chat.has_pending_inbox_or_release
    Agent.reply_stream = _guard_reply_stream(Agent.reply_stream)
    _chat.has_pending_inbox_or_release = _guard_has_pending(_chat.has_pending_inbox_or_release)


def uninstall() -> None:
    """Put agentscope back as it was."""
    if not _ORIGINALS:
        return
    Agent.reply_stream = _ORIGINALS.pop("reply_stream")
    _chat.has_pending_inbox_or_release = _ORIGINALS.pop("has_pending_inbox_or_release")
    PARKED.clear()

"""agentscope's private surface: every name, string mark and per-release
shim the harness depends on, in one place.

agentscope's application layer has no public API for what the harness
drives (the chat endpoint's function, the inbox hand-off protocol, the run
registry, the dispatchers), so the harness reaches into ``agentscope.app``'s
private modules. When a release moves one of these, this module is what
changes; the gate's probe names the line here that failed.

Its twin :mod:`.marks` holds the strings agentscope writes (reminder
texts, task names, its logger), importable without agentscope. Public names
the rest of the harness uses (``MessageBusKeys``, events, messages) are
imported where they are used.
"""
from __future__ import annotations

import inspect

# The routes a client calls, as plain functions (FastAPI's dependencies are
# passed by hand), and the 409/404 they answer with.
from agentscope.app._router._chat import chat as chat_endpoint
from agentscope.app._router._schema import ChatRequest
from agentscope.app._router._session import interrupt_session
from fastapi import HTTPException

# The inbox hand-off protocol and the trigger queue (producers' side).
from agentscope.app._bus_ops import deliver_to_inbox, enqueue_run_trigger

# The parts agentscope's FastAPI lifespan wires together.
from agentscope.app._manager import (
    BackgroundTaskManager,
    CancelDispatcher,
    ChatRunRegistry,
    SchedulerManager,
    WakeupDispatcher,
)
from agentscope.app._service import ChatService, ResourceAccessService, SessionService
from agentscope.app._tool._constants import HANDLE_LEN
from agentscope.app.message_bus import MessageBusKeys

from .marks import (
    AGENTSCOPE_ACTOR,
    AGENTSCOPE_LOGGER,
    AGENTSCOPE_WARNINGS,
    BACKGROUND_TASK_ID,
    FAILURE_REMINDER_MARK,
    REMINDER_MARK,
    WAKEUP_DISPATCHER,
)


__all__ = [
    "AGENTSCOPE_ACTOR", "AGENTSCOPE_LOGGER", "AGENTSCOPE_WARNINGS", "BACKGROUND_TASK_ID",
    "CANCEL_CHANNELS", "FAILURE_REMINDER_MARK", "HANDLE_LEN", "REMINDER_MARK",
    "WAKEUP_DISPATCHER", "BackgroundTaskManager", "CancelDispatcher", "ChatRequest",
    "ChatRunRegistry", "ChatService", "HTTPException", "ResourceAccessService",
    "SchedulerManager", "WakeupDispatcher", "chat_endpoint", "deliver_to_inbox",
    "derive_parked_status", "enqueue_run_trigger", "interrupt_session", "scheduling_off",
]

#: Channels the cancel dispatcher acts on as soon as a message arrives,
#: with no bus operation of its own.
CANCEL_CHANNELS = frozenset(
    {
        MessageBusKeys.session_interrupt_channel(),
        MessageBusKeys.session_cancel_channel(),
        MessageBusKeys.task_cancel_channel(),
    },
)

def derive_parked_status(context: list) -> str:
    """``idle``, or what the agent's stored context is parked on, as
    agentscope's session service derives it."""
    return str(SessionService.derive_parked_status(context).value)


def scheduling_off() -> dict:
    """``enabled=False`` where ``SchedulerManager`` takes it (2.0.8 on);
    before that the manager is simply never started, so no APScheduler
    runs on the story's loop either way."""
    parameters = inspect.signature(SchedulerManager).parameters
    return {"enabled": False} if "enabled" in parameters else {}

"""agentscope's private surface: every name, string mark and per-release
shim the harness depends on, in one place.

agentscope's application layer has no public API for what the harness
drives (the chat endpoint's function, the inbox hand-off protocol, the run
registry, the dispatchers), so the harness reaches into ``agentscope.app``'s
private modules. When a release moves one of these, this module is what
changes; the gate's probe names the line here that failed.

Releases differ in more than names. :data:`INBOX` is the installed
release's inbox hand-off (:func:`inbox_protocol`): ``deliver_to_inbox`` and
the consumer registration from 2.0.7, before that the push-then-wake its
own producers made; :data:`ABSENT` is what the release lacks that some
properties are about (they are "not applicable" there).

Its twin :mod:`.marks` holds the strings agentscope writes (reminder
texts, task names, its logger), importable without agentscope. Public names
the rest of the harness uses (``MessageBusKeys``, events, messages) are
imported where they are used.
"""
from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

# The routes a client calls, as plain functions (FastAPI's dependencies are
# passed by hand), and the 409/404 they answer with.
from agentscope.app._router._chat import chat as chat_endpoint
from agentscope.app._router._schema import ChatRequest
from agentscope.app._router import _session as _session_routes
from agentscope.app._router._session import interrupt_session
from fastapi import HTTPException

# The inbox hand-off protocol and the trigger queue (producers' side).
from agentscope.app import _bus_ops
from agentscope.app._bus_ops import enqueue_run_trigger

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
from agentscope.app.message_bus import MessageBus, MessageBusKeys

from .marks import (
    AGENTSCOPE_ACTOR,
    AGENTSCOPE_LOGGER,
    AGENTSCOPE_WARNINGS,
    BACKGROUND_TASK_ID,
    FAILURE_REMINDER_MARK,
    REMINDER_MARK,
    WAKEUP_DISPATCHER,
)


#: agentscope's own delete route (None on a release without one).
delete_session_route = getattr(_session_routes, "delete_session", None)

__all__ = [
    "AGENTSCOPE_ACTOR", "AGENTSCOPE_LOGGER", "AGENTSCOPE_WARNINGS", "BACKGROUND_TASK_ID",
    "CANCEL_CHANNELS", "FAILURE_REMINDER_MARK", "HANDLE_LEN", "REMINDER_MARK",
    "WAKEUP_DISPATCHER", "BackgroundTaskManager", "CancelDispatcher", "ChatRequest",
    "ChatRunRegistry", "ChatService", "HTTPException", "ResourceAccessService", "SessionService",
    "SchedulerManager", "WakeupDispatcher", "chat_endpoint", "deliver_to_inbox",
    "delete_session_route", "derive_parked_status", "enqueue_run_trigger", "interrupt_session", "scheduling_off",
    "INBOX", "InboxProtocol", "inbox_protocol", "ABSENT", "absent_features",
    "REGISTRATION", "LEADER_REMINDER", "CHANNEL_MESSAGE", "assign_workspace_id", "bind_workspaces",
    "list_skills", "taken_by",
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
    # Public from 2.0.6; 2.0.4 and 2.0.5 name it _derive_parked_status.
    derive = getattr(SessionService, "derive_parked_status", None) or getattr(
        SessionService, "_derive_parked_status",
    )
    return str(derive(context).value)


def bind_workspaces(manager, storage) -> None:
    """Give the workspace manager its storage, where it takes one (2.0.7
    on); before, it looked nothing up."""
    if hasattr(manager, "bind_storage"):
        manager.bind_storage(storage)


async def assign_workspace_id(manager, **where) -> str:
    """``manager.assign_workspace_id(**where)``: a coroutine from 2.0.7,
    a plain call before."""
    assigned = manager.assign_workspace_id(**where)
    return await assigned if inspect.isawaitable(assigned) else assigned


async def list_skills(workspace, agent_id: str) -> list:
    """The agent's skills in ``workspace`` (per agent from 2.0.7; before,
    the workspace's)."""
    if "agent_id" in inspect.signature(workspace.list_skills).parameters:
        return await workspace.list_skills(agent_id=agent_id)
    return await workspace.list_skills()


def taken_by(callable_, **arguments) -> dict:
    """Those of the keyword ``arguments`` that ``callable_`` takes: the
    wiring the harness gives agentscope's managers grew release by release
    (``SchedulerManager``'s ``workspace_manager`` came in 2.0.7); what an
    older release has no parameter for, it had no use for."""
    parameters = inspect.signature(callable_).parameters
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return arguments
    return {k: v for k, v in arguments.items() if k in parameters}


def scheduling_off() -> dict:
    """``enabled=False`` where ``SchedulerManager`` takes it (2.0.8 on);
    before that the manager is simply never started, so no APScheduler
    runs on the story's loop either way."""
    return taken_by(SchedulerManager, enabled=False)


# ── the inbox hand-off, per release ──────────────────────────────────

#: What a producer's hand-off of one payload is: ``deliver(bus, *,
#: user_id, session_id, agent_id, payload)``.
Deliver = Callable[..., Awaitable[None]]

#: Features of agentscope some properties are about, as :data:`ABSENT`
#: names them when the installed release lacks one.
REGISTRATION = "inbox consumer registration"
LEADER_REMINDER = "leader failure reminder"
CHANNEL_MESSAGE = "channel message trigger"

#: The release that brought the consumer registration (``deliver_to_inbox``,
#: ``register_inbox_consumer``, the turn-tail inbox check).
REGISTRATION_SINCE = "2.0.7"


@dataclass(frozen=True)
class InboxProtocol:
    """How payloads reach a session's inbox on the installed release, and
    the moments of that protocol the harness holds runs at and reads."""

    name: str
    hand_off: str
    """The hand-off in a story's words: what agentscope's producers call."""
    deliver: Deliver
    """A producer's hand-off of one payload, as the release's own producers
    make it."""
    turn_tail: tuple[str, Callable[[str], str]]
    """The bus operation (and the key of a session it is on) a run meets
    once its turn is done: where a new run is held (``acquire_lock`` of the
    inbox lock with the registration; ``release_lock`` of the session lock
    before it, which has no turn-tail check)."""
    at_turn_tail: str = "about to check its inbox"
    """Where a run held at its turn tail is, in a story's words."""
    consumer_key: Callable[[str], str] | None = None
    """The registry of a session's consumer registration (``None``: the
    release has none)."""
    inbox_lock_key: Callable[[str], str] | None = None
    """A session's inbox hand-off lock (``None``: the release has none)."""


#: agentscope's own hand-off calls: the bus's operations and the inbox
#: protocol's functions. A task that runs one for the task that created it
#: acts for that task (a reference fix awaits an inbox drain through
#: cancels in a task of its own).
HAND_OFF_CALLS = frozenset(
    name for owner in (MessageBus, _bus_ops) for name, call in vars(owner).items()
    if not name.startswith("_") and inspect.iscoroutinefunction(call)
)


def push_then_wake(bus_ops, keys) -> Deliver:
    """What every producer of agentscope 2.0.3-2.0.6 did with a payload
    (``TeamSay``, ``AgentCreate``, ``AgentInvite``, the background tool's
    deliverer, the scheduler): push it onto the session's inbox queue, then
    queue a ``wake`` trigger, whatever the session is doing. Nothing is
    locked and no consumer is asked: a running session's trigger is dropped
    by the dispatcher, the run being trusted to drain the inbox itself."""

    async def deliver(bus, *, user_id: str, session_id: str, agent_id: str, payload: dict) -> None:
        await bus.queue_push(keys.inbox(session_id), payload)
        await bus_ops.enqueue_run_trigger(
            bus,
            user_id=user_id,
            session_id=session_id,
            agent_id=agent_id,
        )

    return deliver


def inbox_protocol(bus_ops=_bus_ops, keys=MessageBusKeys) -> InboxProtocol:
    """The hand-off protocol ``bus_ops`` (``agentscope.app._bus_ops``) and
    ``keys`` (``MessageBusKeys``) make: the consumer registration where
    ``deliver_to_inbox`` exists, else the producers' push-then-wake where
    ``enqueue_run_trigger`` does. Anything older raises ImportError (the
    gate's probe reports it as "cannot drive")."""
    if hasattr(bus_ops, "deliver_to_inbox"):
        return InboxProtocol(
            name="consumer registration",
            hand_off="deliver_to_inbox",
            deliver=bus_ops.deliver_to_inbox,
            turn_tail=("acquire_lock", keys.inbox_lock),
            consumer_key=keys.inbox_consumer,
            inbox_lock_key=keys.inbox_lock,
        )
    if hasattr(bus_ops, "enqueue_run_trigger") and hasattr(keys, "inbox"):
        return InboxProtocol(
            name="push then wake",
            hand_off="queue_push, then enqueue_run_trigger",
            deliver=push_then_wake(bus_ops, keys),
            turn_tail=("release_lock", keys.session_lock),
            at_turn_tail="about to release the session; this release has no turn-tail inbox check",
        )
    raise ImportError(
        "agentscope.app._bus_ops has neither deliver_to_inbox nor "
        "enqueue_run_trigger: no inbox hand-off the harness knows",
    )


def absent_features(
    protocol: InboxProtocol, chat_service=ChatService, keys=MessageBusKeys,
) -> dict[str, str]:
    """What the installed release lacks of what some properties are about:
    feature -> why (a property needing one is not applicable here)."""
    absent = {}
    if protocol.consumer_key is None:
        absent[REGISTRATION] = (
            "this agentscope has no inbox consumer registration "
            f"(deliver_to_inbox came in {REGISTRATION_SINCE})"
        )
    if not hasattr(keys, "WAKEUP_KIND_MESSAGE"):
        absent[CHANNEL_MESSAGE] = (
            "this agentscope's wake-up queue takes no message from a channel "
            "(the 'message' trigger came in 2.0.6)"
        )
    if not hasattr(chat_service, "_notify_leader_of_failure"):
        absent[LEADER_REMINDER] = (
            "this agentscope never tells a team leader that a member's reply "
            "failed (ChatService._notify_leader_of_failure came in 2.0.7)"
        )
    return absent


#: The installed release's hand-off protocol.
INBOX = inbox_protocol()
#: Its producers' hand-off (what the harness's producers call).
deliver_to_inbox = INBOX.deliver
#: What the installed release lacks, feature -> why.
ABSENT = absent_features(INBOX)

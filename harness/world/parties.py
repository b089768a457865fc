"""What the parties outside agentscope do, through agentscope's own doors.

Each function is one action of a user, a client or a producer, written as
the coroutine a real one would run: the chat endpoint's route function, the
interrupt route, ``deliver_to_inbox``, a channel's ``enqueue_run_trigger``.
:class:`~harness.world.world.World` runs them as actors, one switch point
at a time.
"""
from __future__ import annotations

from harness.kernel.controlled_storage import InjectedStorageFault

from .app import AgentscopeApp
from .surface import (
    ChatRequest,
    HTTPException,
    SessionService,
    chat_endpoint,
    delete_session_route,
    deliver_to_inbox,
    enqueue_run_trigger,
    interrupt_session,
)


async def post_chat(app: AgentscopeApp, agent_id: str, session_id: str, payload) -> str | None:
    """POST /chat/ as the user; the reason the endpoint gave if it refused
    it (409: a run is in flight), else None."""
    request = ChatRequest(agent_id=agent_id, session_id=session_id, input=payload)
    try:
        await chat_endpoint(
            request,
            user_id=app.user_id,
            chat_service=app.chat_service,
            chat_run_registry=app.registry,
            message_bus=app.bus,
        )
    except HTTPException as refused:
        if refused.status_code != 409:
            raise
        return str(refused.detail)
    except InjectedStorageFault as failed:  # an error answer: the message went nowhere
        return f"error: {failed}"
    return None


async def press_stop(app: AgentscopeApp, agent_id: str, session_id: str) -> None:
    """POST /sessions/{id}/interrupt as the user (a 404, nothing to stop,
    is an answer too)."""
    try:
        await interrupt_session(
            session_id,
            agent_id=agent_id,
            user_id=app.user_id,
            chat_service=app.chat_service,
        )
    except HTTPException as refused:
        if refused.status_code != 404:
            raise


async def deliver(app: AgentscopeApp, agent_id: str, session_id: str, payload: dict) -> None:
    """A producer (team member, channel, background task) hands a payload
    to the session's inbox through the hand-off protocol."""
    await deliver_to_inbox(
        app.bus,
        user_id=app.user_id,
        session_id=session_id,
        agent_id=agent_id,
        payload=payload,
    )


async def channel_message(app: AgentscopeApp, agent_id: str, session_id: str, message) -> None:
    """A channel's gateway queues a ``message`` trigger for the wake-up
    dispatcher (what it does when no run holds the session)."""
    await enqueue_run_trigger(
        app.bus,
        app.user_id,
        session_id,
        agent_id,
        kind="message",
        inputs=message,
    )


async def delete_session(app: AgentscopeApp, agent_id: str, session_id: str) -> None:
    """DELETE /sessions/{id} as the user: agentscope's delete route, which
    cancels a run in flight (through the cancel dispatchers), waits for its
    lock to clear, then deletes the record and purges the session's bus
    state."""
    service = SessionService(app.storage, app.bus, app.stage.workspace_manager)
    try:
        await delete_session_route(session_id, agent_id=agent_id, user_id=app.user_id, session_service=service)
    except HTTPException as refused:
        if refused.status_code != 404:
            raise

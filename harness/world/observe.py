"""Reading one session off the bus and storage, as a
:class:`~harness.world.observation.SessionView`.

Live state (events published, payloads pushed and queued, the consumer
registration, the lock) comes from the controlled bus and its inspector;
persisted state (parked status, the agent's context) from storage, read
again only after a write that may have changed it.
"""
from __future__ import annotations

from collections.abc import Callable

from agentscope.app.message_bus import MessageBusKeys

from harness.kernel.bus_inspector import BusInspector
from harness.kernel.controlled_bus import ControlledBus
from harness.kernel.interleaver import Interleaver

from .app import AgentscopeApp
from .observation import SessionView
from .surface import INBOX, derive_parked_status


class SessionReader:
    """Builds session views; caches the persisted half between writes."""

    def __init__(
        self,
        app: AgentscopeApp,
        bus: ControlledBus,
        inspector: BusInspector,
        interleaver: Interleaver,
        run_alive: Callable[[str], bool],
        setup: Callable,
    ) -> None:
        self._app = app
        self._bus = bus
        self._inspector = inspector
        self._interleaver = interleaver
        self._run_alive = run_alive
        self._setup = setup
        self._stored: dict[str, tuple[tuple[int, int], SessionView]] = {}

    def events(self, session_id: str) -> list[dict]:
        """Every event the session published, trimmed or not (the bus
        wrapper keeps them; agentscope trims the log after each run)."""
        return self._bus.appended.get(MessageBusKeys.session_events(session_id), [])

    def view(self, session_id: str, alias: str) -> SessionView:
        """The session as it is now."""
        inbox = MessageBusKeys.inbox(session_id)
        lock = MessageBusKeys.session_lock(session_id)
        crashed = {r.task for r in self._interleaver.crashed()}
        view = SessionView(
            alias=alias,
            session_id=session_id,
            events=list(self.events(session_id)),
            inbox_pushes=list(self._bus.pushed.get(inbox, [])),
            queued=self._inspector.peek_queue(inbox),
            consumer_registered=INBOX.consumer_key is not None and bool(
                self._inspector.peek_registry(INBOX.consumer_key(session_id)),
            ),
            run_alive=self._run_alive(session_id),
            lock_leased=self._inspector.lock_holder(lock) is not None,
            tool_runs=[
                e.args.get("note", "")
                for e in self._app.desk.runs()
                if e.session_id == session_id
            ],
            # A crashed process holds nothing: its lease merely outlives it.
            lock_holders={
                self._interleaver.label_of(t)
                for t in self._bus.inside.get(lock, set())
                if not t.done() and t not in crashed
            },
        )
        persisted = self._persisted(session_id, alias)
        view.parked_status = persisted.parked_status
        view.stored = persisted.stored
        view.awaiting_call_ids = list(persisted.awaiting_call_ids)
        view.resolved_call_ids = list(persisted.resolved_call_ids)
        view.context_hints = list(persisted.context_hints)
        view.context_user_texts = list(persisted.context_user_texts)
        view.context_tool_outputs = list(persisted.context_tool_outputs)
        return view

    def _persisted(self, session_id: str, alias: str) -> SessionView:
        version = self._app.storage.version_of(session_id)
        stored = self._stored.get(session_id)
        if stored is None or stored[0] != version:
            record = self._setup(
                self._app.stage.storage.get_session(self._app.user_id, "", session_id),
            )
            persisted = SessionView(alias, session_id, stored=record is not None)
            if record is not None:
                _read_context(persisted, record.state.context)
            stored = (version, persisted)
            self._stored[session_id] = stored
        return stored[1]


def _read_context(view: SessionView, context: list) -> None:
    """Fill the persisted half of a view from an agent's context."""
    view.parked_status = derive_parked_status(context)
    if context and context[-1].role == "assistant":
        view.awaiting_call_ids = [
            block.id
            for block in context[-1].get_content_blocks("tool_call")
            if str(getattr(block.state, "value", block.state)) in ("asking", "submitted")
        ]
    for msg in context:
        if msg.role == "user":
            view.context_user_texts.append(msg.get_text_content() or "")
        for block in msg.get_content_blocks():
            kind = getattr(block, "type", None)
            if kind == "tool_result":
                view.resolved_call_ids.append(block.id)
                view.context_tool_outputs.append(str(block.output))
            elif kind == "hint":
                view.context_hints.append(str(block.hint))

"""One example's world under control: loop, clock, scheduler, bus, app.

:class:`ControlledWorld` is the synchronous face the stateful rules use. It
builds agentscope's app layer (:mod:`harness.world`) on a
:class:`~harness.event_loop.VirtualTimeEventLoop`, hands agentscope a
:class:`~harness.controlled_bus.ControlledBus` around the fake bus and a
:class:`~harness.controlled_storage.SerialStorage` around the real storage,
starts the real ``WakeupDispatcher`` and ``CancelDispatcher``, then switches
control on.

Tasks come in two kinds. *Actors* are the independent parties of a story:
every chat run (spawned by agentscope's run registry), the wake-up
dispatcher, its backoff retries, the cancel dispatcher's loops, and each
action the harness performs on a user's or a producer's behalf. Every other task is a *helper* of the actor that created
it (a run's shielded persist, SQLAlchemy's session closers), and moves
whenever its actor is moved (:meth:`ControlledWorld.finish`). The
interleaving choices are between actors.
"""
from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from agentscope.app.message_bus import MessageBus, MessageBusKeys

from fakes.bus import VirtualRedisBus
from .cast import AIDE, CHIEF, HELPER, INVITE_DESCRIPTIONS, LEADER, SOLO, WORKER
from .clock import VirtualClock
from .controlled_bus import ControlledBus
from .controlled_storage import SerialStorage
from .event_loop import VirtualTimeEventLoop
from .quiet import silence_agentscope
from .observation import Observation, SessionView
from .scheduler import ControlledTask, Op, Scheduler
from .trace import apply_aliases
from .world import (
    Stage,
    World,
    build_world,
    install_deterministic_factories,
    open_stage,
)

#: Task names agentscope gives its independent parties: runs
#: (``chat-run:``, ``wake-run:``, ``resume-run:``), the wake-up dispatcher
#: and its backoff retries, and the cancel dispatcher's three loops
#: (``cancel-dispatcher:session``, ``:task``, ``:interrupt``); and, by
#: their coroutine's name (agentscope leaves them unnamed), the deliverer of
#: a background tool's result and the clean-up of its registration, which
#: outlive the run that offloaded the tool.
_AGENTSCOPE_ACTOR = re.compile(
    r"(-run:|-retry:|^wakeup-dispatcher$|^cancel-dispatcher:"
    r"|^_deliver_when_done(#\d+)?$|^_safe_bg_task_unregister(#\d+)?$)",
)

#: A background task's id in its registration key. agentscope draws these
#: from ``shortuuid`` (no id hook reaches them), so traces show them
#: numbered in order of first appearance instead.
_BACKGROUND_TASK_ID = re.compile(r"(bg_tasks:[^#\s]+#)([A-Za-z0-9]{22})\b")

#: Channels the cancel dispatcher acts on as soon as a message arrives,
#: with no bus operation of its own: each delivery is a switch point, so
#: when an interrupt reaches it is an interleaving choice.
CANCEL_CHANNELS = frozenset(
    {
        MessageBusKeys.session_interrupt_channel(),
        MessageBusKeys.session_cancel_channel(),
        MessageBusKeys.task_cancel_channel(),
    },
)

#: Prefix of every task the harness starts on someone's behalf.
HARNESS_ACTOR_PREFIX = "» "


class _Theatre:
    """What every story in this process shares: the loop, the clock and
    the :class:`~harness.world.Stage` (storage, workspaces, agents).

    SQL storage is bound to the loop it was opened on, so one loop serves
    all stories; each story gets its own scheduler, bus and app on it."""

    _current: "_Theatre | None" = None

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.loop = VirtualTimeEventLoop(self.clock)
        self.basedir = Path(tempfile.mkdtemp(prefix="hitl-stage-", dir=_scratch_dir()))
        self.stories = 0
        self.stage: Stage = self.loop.run_until_complete(self._open())
        silence_agentscope()  # after agentscope configured its own logger
        atexit.register(self.close)

    async def _open(self) -> Stage:
        install_deterministic_factories(self.clock.now, story=0)
        stage = await open_stage(self.basedir)
        # The first three come first, so that their ids stay as they were
        # before the second team joined.
        for name in (LEADER, WORKER, SOLO, HELPER, CHIEF, AIDE):
            await stage.add_agent(
                name,
                invite_description=INVITE_DESCRIPTIONS.get(name),
            )
        return stage

    @classmethod
    def get(cls) -> "_Theatre":
        if cls._current is None:
            cls._current = cls()
        return cls._current

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.set_task_factory(None)
        self.loop.run_until_complete(self.stage.close())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        shutil.rmtree(self.basedir, ignore_errors=True)


class ControlledWorld:
    """agentscope's app layer, one task at a time, on virtual time.

    One story's world: a fresh scheduler, bus and agentscope app on the
    process' shared theatre (whose agents are those of
    :mod:`harness.cast`); the story opens its sessions and makes its
    teams."""

    def __init__(self, bus: MessageBus | None = None) -> None:
        theatre = _Theatre.get()
        theatre.stories += 1
        self.clock = theatre.clock
        self.clock.rewind()
        self.loop = theatre.loop
        asyncio.set_event_loop(self.loop)
        install_deterministic_factories(self.clock.now, story=theatre.stories)
        self._story_ids = re.compile(
            rf"\b{theatre.stories:06x}([0-9a-f]{{6}})0{{20}}\b",
        )
        self.aliases: dict[str, str] = {}
        self._background_tasks: dict[str, int] = {}
        self.scheduler = Scheduler(self.loop, rename=self.alias)
        self.fake_bus = bus or VirtualRedisBus(self.clock.now)
        self.bus = ControlledBus(
            self.fake_bus,
            self.scheduler,
            deliveries=CANCEL_CHANNELS,
        )
        self.stage = theatre.stage
        self.storage = self.stage.storage
        self.world: World = self.scheduler.run_uncontrolled(
            build_world(
                self.stage,
                self.bus,
                wrap_storage=lambda s: SerialStorage(s, self.scheduler),
            ),
        )
        self._closed = False
        self._stored_views: dict[str, tuple[int, SessionView]] = {}

    # ── setup ─────────────────────────────────────────────────────────

    def setup(self, coro: Coroutine) -> Any:
        """Run setup code before control starts (or between steps)."""
        return self.scheduler.run_uncontrolled(coro)

    def start(self) -> None:
        """Start the wake-up, then the cancel dispatcher, as the app's
        lifespan does, then take control: from here on every bus operation
        is a switch point."""
        self.setup(self.world.dispatcher.__aenter__())
        self.setup(self.world.cancel_dispatcher.__aenter__())
        self.scheduler.controlling = True
        self.scheduler.quiesce()

    def pause_model_calls(self) -> None:
        """Make every model call a switch point (``model_call <script>``),
        after its turn is taken and before it answers: a run can then be
        stopped while its model is streaming, and a cancel delivered there
        lands in the model call, as a user's stop button mid-answer does."""

        async def while_answering(script: str) -> None:
            await self.scheduler.switch_point(Op("model_call", script))
            self.scheduler.record("model_call", script)

        self.world.book.while_answering = while_answering

    def name_session(self, session_id: str, alias: str) -> None:
        """Show ``session_id`` as ``alias`` in labels, traces and reports."""
        self.aliases[session_id] = alias

    def alias(self, text: str) -> str:
        """``text`` with every known session id replaced by its alias and
        every other id of this story by its story-relative number."""
        text = self._story_ids.sub(
            lambda m: f"#{int(m.group(1), 16)}",
            apply_aliases(text, self.aliases),
        )
        return _BACKGROUND_TASK_ID.sub(
            lambda m: m.group(1) + self._background_task_number(m.group(2)),
            text,
        )

    def _background_task_number(self, task_id: str) -> str:
        number = self._background_tasks.setdefault(
            task_id,
            len(self._background_tasks) + 1,
        )
        return f"job{number}"

    # ── actors ────────────────────────────────────────────────────────

    def is_actor(self, record: ControlledTask) -> bool:
        label = record.label or ""
        return label.startswith(HARNESS_ACTOR_PREFIX) or bool(
            _AGENTSCOPE_ACTOR.search(label),
        )

    def actor_of(self, record: ControlledTask) -> ControlledTask:
        """The actor a task works for (itself, if it is one)."""
        current: ControlledTask | None = record
        while current is not None:
            if self.is_actor(current):
                return current
            current = current.parent
        return record

    def act(self, coro: Coroutine, label: str) -> ControlledTask:
        """Start an action on someone's behalf and let it run to its end
        (or until it waits for another actor)."""
        record = self.scheduler.spawn(coro, HARNESS_ACTOR_PREFIX + label)
        self.finish(record)
        return record

    def finish(self, actor: ControlledTask, stop=None) -> bool:
        """Move ``actor`` and its helpers, oldest first, until it ends, it
        can only wait for another actor, or ``stop(actor)`` holds."""
        while not actor.done:
            if stop is not None and stop(actor):
                return True
            mine = [r for r in self.working_for(actor) if r.parked]
            if not mine:
                return False
            self.scheduler.advance(mine[0])
        return True

    def working_for(self, actor: ControlledTask) -> list[ControlledTask]:
        """Live tasks that work for ``actor`` (itself included), oldest
        first."""
        return [r for r in self.scheduler.tasks() if self.actor_of(r) is actor]

    def actors(self) -> list[ControlledTask]:
        """Live actors, oldest first."""
        return [r for r in self.scheduler.tasks() if self.is_actor(r)]

    def movable_actors(self) -> list[ControlledTask]:
        """Live actors that could take a step now (they or a helper is
        parked at a switch point)."""
        movable = {self.actor_of(r).index for r in self.scheduler.parked()}
        return [a for a in self.actors() if a.index in movable]

    def step(self, actor: ControlledTask) -> None:
        """One switch point of ``actor`` (or of its oldest parked helper)."""
        mine = [r for r in self.working_for(actor) if r.parked]
        if mine:
            self.scheduler.advance(mine[0])

    def run_of(self, session_id: str) -> ControlledTask | None:
        """The live chat run of a session, if any."""
        task = self.world.registry.get(session_id)
        if task is None or task.done():
            return None
        return next(
            (r for r in self.scheduler.tasks() if r.task is task),
            None,
        )

    def dispatcher(self) -> ControlledTask | None:
        """The dispatcher's subscription loop."""
        return next(
            (r for r in self.actors() if r.label == "wakeup-dispatcher"),
            None,
        )

    def crash(self, run: ControlledTask) -> None:
        """The process running ``run`` dies mid-flight: no cleanup runs,
        its leases go unrenewed until they expire, and the rest of the
        world (the dispatcher, producers, other runs) carries on."""
        doomed = self.scheduler.crash(run)
        self.world.registry.process_died(run.task)
        if isinstance(self.fake_bus, VirtualRedisBus):
            self.fake_bus.process_died([r.task for r in doomed])

    def settle(self) -> None:
        """Let everything run to rest, with time passing as needed."""
        self.scheduler.settle()

    # ── observation ───────────────────────────────────────────────────

    def observe(self, settled: bool = False, past_leases: bool = False) -> Observation:
        """What every named session looks like right now."""
        return Observation(
            past_leases=past_leases,
            dispatcher_alive=self.dispatcher() is not None,
            sessions={
                alias: self._view(session_id, alias)
                for session_id, alias in self.aliases.items()
            },
            settled=settled,
        )

    def observe_session(self, alias: str) -> SessionView:
        """One named session as it looks right now."""
        session_id = next(s for s, a in self.aliases.items() if a == alias)
        return self._view(session_id, alias)

    def _view(self, session_id: str, alias: str) -> SessionView:
        inbox = MessageBusKeys.inbox(session_id)
        consumer = MessageBusKeys.inbox_consumer(session_id)
        lock = MessageBusKeys.session_lock(session_id)
        view = SessionView(
            alias=alias,
            session_id=session_id,
            events=list(self.bus.appended.get(MessageBusKeys.session_events(session_id), [])),
            inbox_pushes=list(self.bus.pushed.get(inbox, [])),
            queued=self._queued(inbox),
            consumer_registered=self._registered(consumer),
            run_alive=self.run_of(session_id) is not None,
            lock_leased=self._leased(lock),
            tool_runs=[
                e.args.get("note", "")
                for e in self.world.desk.runs()
                if e.session_id == session_id
            ],
            lock_holders={
                self.scheduler.label_of(t)
                for t in self.bus.inside.get(lock, set())
                if not t.done()
            },
        )
        stored = self._stored_views.get(session_id)
        if stored is None or stored[0] != self.world.storage.writes:
            record = self.setup(
                self.storage.get_session(self.stage.user_id, "", session_id),
            )
            persisted = SessionView(alias, session_id)
            if record is not None:
                _read_context(persisted, record.state.context)
            stored = (self.world.storage.writes, persisted)
            self._stored_views[session_id] = stored
        persisted = stored[1]
        view.parked_status = persisted.parked_status
        view.awaiting_call_ids = list(persisted.awaiting_call_ids)
        view.resolved_call_ids = list(persisted.resolved_call_ids)
        view.context_hints = list(persisted.context_hints)
        view.context_user_texts = list(persisted.context_user_texts)
        view.context_tool_outputs = list(persisted.context_tool_outputs)
        return view

    def _queued(self, key: str) -> list[dict]:
        if isinstance(self.fake_bus, VirtualRedisBus):
            return self.fake_bus.peek_queue(key)
        return []

    def _leased(self, key: str) -> bool:
        if isinstance(self.fake_bus, VirtualRedisBus):
            return self.fake_bus.lock_holder(key) is not None
        return False

    def _registered(self, namespace: str) -> bool:
        if isinstance(self.fake_bus, VirtualRedisBus):
            return bool(self.fake_bus.peek_registry(namespace))
        return False

    def render_trace(self) -> str:
        """The operation trace with ids shown as aliases."""
        return self.alias(self.scheduler.trace.render())

    # ── teardown ──────────────────────────────────────────────────────

    def close(self) -> None:
        """Stop every task of this story and close its app."""
        if self._closed:
            return
        self._closed = True
        self.scheduler.controlling = False
        for record in self.scheduler.tasks() + self.scheduler.crashed():
            if record.gate is not None and not record.gate.done():
                record.gate.set_result(None)
        self.scheduler.quiesce()
        self.setup(self._shutdown())
        self.loop.set_task_factory(None)

    async def _shutdown(self) -> None:
        await self.world.cancel_dispatcher.__aexit__(None, None, None)
        await self.world.dispatcher.__aexit__(None, None, None)
        pending = [
            r.task
            for r in self.scheduler.tasks() + self.scheduler.crashed()
            if r.task is not asyncio.current_task()
        ]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.world.close()


def _read_context(view: SessionView, context: list) -> None:
    """Fill the persisted-state half of a view from an agent context."""
    from agentscope.app._service import SessionService  # pylint: disable=import-outside-toplevel

    view.parked_status = str(SessionService.derive_parked_status(context).value)
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


def _scratch_dir() -> str | None:
    """Where worlds keep their sqlite file and workspaces: memory-backed
    ``/dev/shm`` when the machine has it (no fsync cost), else the default
    temporary directory."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None

"""One story's world, and the one object the rules talk to.

:class:`World` builds agentscope's app (:mod:`.app`) on the process'
:class:`~harness.world.stage.Stage` once per node (:mod:`.nodes`), hands
each a :class:`~harness.kernel.controlled_bus.ControlledBus` around its bus
(the fake, or agentscope's Redis bus: :mod:`.buses`) and one
:class:`~harness.kernel.controlled_storage.SerialStorage` around the real
storage, starts the real ``WakeupDispatcher`` and ``CancelDispatcher``,
then switches control on. Its methods come in three groups:

- **observe**: :meth:`World.observe` and the small questions a rule's
  precondition asks;
- **the parties' actions**: users, producers, channels, leaders, jobs,
  crashes, bus faults, restarts (:mod:`.parties`, :mod:`.lifecycle`);
- **control**: step, finish, settle, pass time.

Sessions are named by their alias in the cast (``leader``, ``worker``...).
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from typing import Any

from agentscope.app.message_bus import MessageBusKeys

from fakes.model import CallTool, Text, Turn
from harness.kernel.interleaver import ControlledTask, Interleaver, Op

from . import parties
from .actors import Actors, without_node
from .app import AgentscopeApp
from .buses import bus_for
from .cast import TEAM_OF, open_cast
from .deployment import Deployment
from .failures import FailureWatch
from .faults import WorldFaults
from .hand_off_steps import HandOffSteps
from .ids import install_deterministic_factories
from .invitations import Invitations
from .lifecycle import WorldLifecycle
from .naming import Naming
from .nodes import Node, build_nodes, shut_down, start_nodes
from .observation import Observation, SessionView
from .observe import SessionReader
from .stage import Stage
from .storage_account import AccountedStorage
from .surface import INBOX, WAKEUP_DISPATCHER


class World(WorldFaults, WorldLifecycle, HandOffSteps):
    """agentscope's app layer for one story, one task at a time, on
    virtual time."""

    def __init__(self, deployment: Deployment = Deployment()) -> None:
        stage = Stage.shared()
        self.deployment = deployment
        stage.stories += 1
        self.stage = stage
        self.clock = stage.clock
        self.clock.rewind()
        self.loop = stage.loop
        asyncio.set_event_loop(self.loop)
        install_deterministic_factories(self.clock.timestamp, story=stage.stories)
        #: This story's sessions by alias, in the order they were opened.
        self.sessions: dict[str, str] = {}
        self._agents: dict[str, str] = {}
        self._naming = Naming(stage.stories)
        self.interleaver = Interleaver(self.loop, rename=self.alias)
        self.actors = Actors(self.interleaver)
        buses, self._inspector, self._link = bus_for(deployment, stage, self.interleaver)
        self.interleaver.label_nodes, self.interleaver.processes = deployment.nodes > 1, deployment.nodes
        # When the bus's leases and TTLs end, for settling to skip repeats
        # up to (the fake bus says; a real server does not, so none).
        self.interleaver.expiries = getattr(buses[0], "expiries", None)
        storage = AccountedStorage(stage.storage, self.interleaver)
        #: The deployment's processes; node 0 serves whatever names none.
        self.nodes: list[Node] = build_nodes(stage, self.interleaver, buses, storage)
        self.app: AgentscopeApp = self.nodes[0].app
        self.bus = self.nodes[0].bus
        self._invitations = Invitations(self.app, self.setup)
        self._reader = SessionReader(
            self.app, self.bus, self._inspector, self.interleaver,
            run_alive=lambda session_id: self._run_of_id(session_id) is not None,
            setup=self.setup,
        )
        self._failures = FailureWatch(self.loop, self.interleaver, self.bus, self.app.book, storage)
        self.interleaver.too_busy = self.too_busy
        #: Deleted sessions' ids, with the alias each had.
        self.deleted: dict[str, str] = {}
        #: The session each outside party's action was for.
        self._acting_for: dict[ControlledTask, str] = {}
        #: Every delivery by its payload's marker, oldest first (.hand_off_steps).
        self._delivering: dict[str, ControlledTask] = {}
        self._closed = False

    # ── setting the story up ──────────────────────────────────────────

    def setup(self, coro: Coroutine) -> Any:
        """Run setup code before control starts (or between steps)."""
        return self.interleaver.run_uncontrolled(coro)

    def open_cast(self, with_chief: bool) -> None:
        """Open the story's first sessions and teams (see
        :func:`.cast.open_cast`)."""
        self.setup(open_cast(self.app, self._meet, with_chief))

    def _meet(self, alias: str, session_id: str) -> None:
        self.sessions[alias] = session_id
        self._agents[alias] = self.app.agent_id(alias)
        self._naming.name(session_id, alias)

    def start(self) -> None:
        """Take control, then start both dispatchers as the app's lifespan
        does: from here on every bus operation is a switch point."""
        self.interleaver.controlling = True
        start_nodes(self.nodes, self.interleaver)
        self.interleaver.quiesce()

    def pause_model_calls(self) -> None:
        """Make every model call a switch point (``model_call <script>``)
        before it answers: a stop can then land while the model streams."""

        async def while_answering(script: str) -> None:
            await self.interleaver.switch_point(Op("model_call", script))
            self.interleaver.record("model_call", script)

        self.app.book.while_answering = while_answering

    def script(self, alias: str, *turns: Turn) -> None:
        self.app.script(alias).add(*turns)  # the next turns of its model

    # ── the parties' actions ──────────────────────────────────────────

    def user_posts(self, alias: str, payload, node: int = 0) -> str | None:
        """The user posts to ``alias`` through node ``node``'s chat
        endpoint; the reason it was refused (409), if it was."""
        app = self.nodes[node].app
        posted = self._act(
            parties.post_chat(app, self._agents[alias], self.sessions[alias], payload),
            f"user posts to {alias}", alias, node,
        )
        return posted.task.result() if posted.task.done() else None

    def user_presses_stop(self, alias: str, node: int = 0) -> None:
        """The user presses stop in ``alias``'s session (served by node
        ``node``)."""
        app = self.nodes[node].app
        self._act(
            parties.press_stop(app, self._agents[alias], self.sessions[alias]),
            f"user interrupts {alias}", alias, node,
        )

    def deliver(self, alias: str, payload: dict, source: str, node: int = 0, wake_late: bool = False,
                held: bool = False, *, marker: str) -> None:
        """``source``, on node ``node``, delivers ``payload`` (``marker``) into ``alias``'s inbox; with
        ``wake_late`` it stops just before queueing the wake-up it owes (if it owes one), with ``held``
        before its first bus operation, to go on as a movable task."""
        wake = self.actors.held_at(Op("queue_push", MessageBusKeys.wakeup_queue())) if wake_late else None
        self._delivering[marker] = self._act(
            parties.deliver(self.nodes[node].app, self._agents[alias], self.sessions[alias], payload),
            f"{source} delivers to {alias}", alias, node, (lambda _actor: True) if held else wake)

    def deliveries_in_flight(self) -> frozenset[str]:
        """The markers of the deliveries not returned yet."""
        return frozenset(m for m, action in self._delivering.items() if not action.done)

    def channel_posts(self, alias: str, message, node: int = 0) -> None:
        """A channel's gateway, on node ``node``, queues ``message`` for ``alias``."""
        self._act(parties.channel_message(self.nodes[node].app, self._agents[alias], self.sessions[alias], message),
                  f"channel posts to {alias}", alias, node)

    def _act(self, coro, label: str, alias: str, node: int, stop=None) -> ControlledTask:
        """An outside party's action for ``alias``, on ``node``."""
        action = self.actors.start(coro, label, node, stop)
        self._acting_for[action] = alias
        return action

    def invite(self, member: str, ask) -> None:
        """The user asks ``member``'s leader for help (``ask``, a user
        message); the leader's model calls ``AgentInvite`` for ``member``,
        which mints its session in that team and delivers the task."""
        leader = TEAM_OF[member]
        self.script(
            leader,
            CallTool(
                "AgentInvite",
                {"target": self.app.invite_target(member), "prompt": "Do the chore."},
            ),
            Text(f"the {member} is on it"),
        )
        self.user_posts(leader, ask)
        run = self.run_of(leader)
        if run is not None:
            self.actors.finish(run)
        self._invitations.sent(member)
        self._invitations.meet(self._meet)

    def oldest_running_job(self, alias: str) -> str | None:
        """The note of ``alias``'s oldest background job still running."""
        return next(iter(self.running_jobs(alias)), None)

    def finish_job(self, note: str) -> None:
        """Let the background job ``note`` finish."""
        self.app.desk.finish_job(note)
        self.interleaver.quiesce()

    # ── control ───────────────────────────────────────────────────────

    def run_of(self, alias: str) -> ControlledTask | None:
        """The live chat run of ``alias``'s session, if any."""
        if alias not in self.sessions:
            return None
        return self._run_of_id(self.sessions[alias])

    def _run_of_id(self, session_id: str) -> ControlledTask | None:
        for node in self.nodes:
            task = node.app.registry.get(session_id)
            if task is not None and not task.done():
                return next((r for r in self.interleaver.tasks() if r.task is task), None)
        return None

    def dispatcher(self, node: int = 0) -> ControlledTask | None:
        """Node ``node``'s wake-up dispatcher loop, while it lives."""
        return next(
            (
                r for r in self.actors.live()
                if r.node == node and without_node(r.label).split("#")[0] == WAKEUP_DISPATCHER
            ),
            None,
        )

    def movable_tasks(self) -> list[str]:
        """Labels of the actors that could take a step now, sorted."""
        return sorted(a.label for a in self.actors.movable())

    def step_task(self, label: str) -> None:
        """The actor labelled ``label`` takes one step (if it can move)."""
        actor = next((a for a in self.actors.movable() if a.label == label), None)
        if actor is not None:
            self.actors.step(actor)

    def run_takes_turn(self, alias: str) -> None:
        """``alias``'s run goes on until its next turn ends and it is about
        to check its inbox (the turn tail), and stops there."""
        run = self.run_of(alias)
        if run is not None:
            self.actors.step(run)
            self._run_to_turn_tail(alias, run)

    def finish_run(self, alias: str) -> None:
        """``alias``'s run goes on until it ends or must wait."""
        run = self.run_of(alias)
        if run is not None:
            self.actors.finish(run)

    def finish_dispatcher(self, node: int = 0) -> None:
        """Node ``node``'s wake-up dispatcher goes on until it must wait."""
        dispatcher = self.dispatcher(node)
        if dispatcher is not None:
            self.actors.finish(dispatcher)

    def _run_to_turn_tail(self, alias: str, run: ControlledTask) -> None:
        """Move ``run`` until it (or a helper: a release may check its
        inbox in a task of its own) is at its turn tail (``INBOX`` says
        where), it ends, or must wait for another party."""
        operation, key_of = INBOX.turn_tail
        self.actors.finish(run, stop=self.actors.held_at(Op(operation, key_of(self.sessions[alias]))))

    def _run_to_model_call(self, run: ControlledTask) -> None:
        """Move a run until its model is answering (or it ends, or must
        wait for another party)."""
        self.actors.finish(
            run,
            stop=lambda r: any(
                t.held and t.pending.name == "model_call"
                for t in self.actors.working_for(r)
            ),
        )

    @contextlib.contextmanager
    def spawned_runs_take_their_turn(self, mid_answer: bool) -> Iterator[None]:
        """Runs spawned inside the block take their first turn, up to its
        tail (or, ``mid_answer``, until their model is answering)."""
        spawned = [len(n.app.registry.spawned) for n in self.nodes]
        yield
        for node, before in zip(self.nodes, spawned):
            for task in node.app.registry.spawned[before:]:
                self._take_first_turn(node, task, mid_answer)

    def _take_first_turn(self, node: Node, task: asyncio.Task, mid_answer: bool) -> None:
        """A run just spawned on ``node`` takes its first turn."""
        alias = next(
            (a for a, sid in self.sessions.items() if node.app.registry.get(sid) is task),
            None,
        )
        run = self.run_of(alias) if alias else None
        if run is not None and mid_answer:
            self._run_to_model_call(run)
        elif run is not None:
            self._run_to_turn_tail(alias, run)

    def settle(self) -> None:
        """Let everything run to rest, with time passing as needed."""
        self.interleaver.settle()

    def pass_time(self, seconds: float) -> None:
        """Virtual time passes; timers falling due fire."""
        self.interleaver.pass_time(seconds)

    # ── observe ───────────────────────────────────────────────────────

    def observe(self, settled: bool = False, past_leases: bool = False) -> Observation:
        """What every session of the story looks like right now."""
        self._invitations.meet(self._meet)
        return Observation(
            past_leases=past_leases,
            dispatcher_alive=all(self.dispatcher(n) is not None for n in self.live_nodes()),
            sessions={
                alias: self._reader.view(session_id, alias)
                for alias, session_id in self.sessions.items()
            },
            deleted=[self._reader.view(session_id, alias) for session_id, alias in self.deleted.items()],
            settled=settled,
        )

    def observe_session(self, alias: str) -> SessionView:
        """One session as it looks right now."""
        return self._reader.view(self.sessions[alias], alias)

    def published(self, alias: str) -> list[dict]:
        """The events ``alias``'s session published so far (none before it
        is opened)."""
        return self._reader.events(self.sessions[alias]) if alias in self.sessions else []

    def running_jobs(self, alias: str) -> list[str]:
        """Notes of ``alias``'s background jobs still running, oldest first."""
        return self.app.desk.running_jobs(self.sessions[alias]) if alias in self.sessions else []

    def dispatcher_waiting(self, node: int = 0) -> bool:
        """Node ``node``'s wake-up dispatcher is held at a bus operation."""
        dispatcher = self.dispatcher(node)
        return dispatcher is not None and dispatcher.held

    def waiting_dispatchers(self) -> list[int]:
        """The nodes whose wake-up dispatcher has work."""
        return [n for n in self.live_nodes() if self.dispatcher_waiting(n)]

    def has_timer(self) -> bool:
        """Some timer is pending: time passing would change something."""
        return self.loop.next_timer_deadline() is not None

    def is_settled(self) -> bool:
        """Nothing can move without a new input: no task held, no timer."""
        return not self.interleaver.held() and not self.has_timer()

    def faulted_sessions(self) -> set[str]:
        """Sessions an injected fault has actually touched (see
        :meth:`.failures.FailureWatch.faulted_sessions`)."""
        return self._failures.faulted_sessions(self.sessions, self._inspector.faults_fired)

    def unexpected_failures(self) -> list[str]:
        """Exceptions no rule injected, since the last call, one line each."""
        return [self.alias(line) for line in self._failures.unexpected()]

    def alias(self, text: str) -> str:
        """``text`` with ids as traces show them (see :mod:`.naming`)."""
        return self._naming(text)

    def render_trace(self) -> str:
        """The operation trace with ids shown as aliases."""
        return self.alias(self.interleaver.trace.render())

    # ── the end ───────────────────────────────────────────────────────

    def close(self) -> None:
        """Stop every task of this story and close its app."""
        if self._closed:
            return
        self._closed = True
        self.interleaver.controlling = False
        for record in self.interleaver.tasks() + self.interleaver.crashed():
            if record.gate is not None and not record.gate.done():
                record.gate.set_result(None)
        self.interleaver.quiesce()
        self.setup(self._shutdown())
        self.setup(self.app.forget_story_sessions())
        self.loop.set_task_factory(None)
        self._failures.close()

    async def _shutdown(self) -> None:
        await shut_down(self.nodes, self.interleaver)
        if self._link is not None:
            self.clock.followers.remove(self._link.follow_clock)
            for pool in self._link.pools:
                await pool.aclose()

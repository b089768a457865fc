"""The stateful machine: stories of parked human-in-the-loop runs.

Each Hypothesis example builds a fresh world (a team leader, an invitable
worker, a solo session, and on machines with ``several_teams`` a second
worker and a second team; see :mod:`harness.cast` and
:class:`~harness.controlled_world.ControlledWorld`)
and plays a story against it, one rule at a time. Rules are what users,
producers and agentscope's own background parties do; their names and
arguments are written so that a shrunk failing program reads as the story
that broke agentscope. User actions enter through agentscope's own chat
endpoint; runs are spawned by agentscope's own run registry and dispatcher.

After every rule the world is run to quiescence and the invariants of
:mod:`properties.invariants` are checked; when the world has settled
(nothing parked, no timer pending) the end-state invariants are checked too.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import json

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
)

from agentscope.app._bus_ops import deliver_to_inbox, enqueue_run_trigger
from agentscope.app._router._chat import chat as chat_endpoint
from agentscope.app._router._session import interrupt_session
from agentscope.app._router._schema import ChatRequest
from agentscope.app.message_bus import MessageBusKeys
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
)
from agentscope.message import (
    HintBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from fastapi import HTTPException

from fakes.model import CallTool, CallTools, Fail, Text
from fakes.permission_gate import (
    BACKGROUND_JOB,
    BATCH_EXTERNAL_JOB,
    BATCH_GATED_ACTION,
)
from harness import agentscope_under_test
from harness.controlled_bus import describe_payload
from harness.cast import CHIEF, LEADER, SOLO, TEAM_OF, WORKER
from harness.controlled_world import ControlledWorld
from harness.scheduler import WorldDidNotSettle
from harness.observation import REQUEST_EVENTS, Observation

from .counterexample import Counterexample, Step
from .invariants import (
    STEP_INVARIANTS,
    InvariantViolated,
    Ledger,
    invariant_statement,
    parked_stays_parked,
)


#: What a model's next turn does, as a story says it.
TURNS = ("calls GatedAction", "calls ExternalJob", "answers")

#: A turn whose model call raises: an injected fault (only machines that
#: list it in ``turns`` script it).
FAILS = "fails"

#: A turn with several calls at once: two that ask the user, one external
#: job (these three park together) and one the policy denies.
SEVERAL_CALLS = "calls several tools"

#: A turn whose call runs long: a background job, which agentscope moves
#: to the background after 10 seconds (only machines with
#: ``background_jobs`` script it).
BACKGROUND = "starts a background job"

#: Where an inbox payload comes from.
SOURCES = ("team member", "channel", "background task")

#: How many of the last bus operations a failure report shows.
TRACE_TAIL = 40

#: Virtual seconds that may pass in one step: a dispatcher backoff, an
#: inbox-lock lease, a session-run lease.
DURATIONS = (0.1, 31.0, 601.0)

#: Bus operations a story may make fail, each on one session's key: the
#: dispatcher's lock check, an event publish, the turn-tail inbox drain,
#: and dropping the inbox-consumer registration.
BUS_FAULTS = {
    "is_locked session lock": ("is_locked", MessageBusKeys.session_lock),
    "log_append session events": ("log_append", MessageBusKeys.session_events),
    "queue_drain inbox": ("queue_drain", MessageBusKeys.inbox),
    "registry_del inbox consumer": (
        "registry_del",
        lambda session_id: f"{MessageBusKeys.inbox_consumer(session_id)}#running",
    ),
}

#: Longer than every lease and TTL agentscope sets (the session lock and the
#: inbox-consumer registration: 600 s).
PAST_EVERY_LEASE = 601.0


def _chosen(attribute: str, among: tuple[str, ...] | None = None):
    """One of the machine's own ``attribute`` values (optionally only those
    also in ``among``): subclasses narrow a scenario by narrowing the
    attribute, and the shrunk program still shows the real argument."""

    def options(machine) -> st.SearchStrategy:
        values = [v for v in getattr(machine, attribute) if among is None or v in among]
        return st.sampled_from(values) if values else st.nothing()

    return st.runner().flatmap(options)


def _session_where(predicate_name: str, opened: bool = True):
    """A session for which the machine's ``predicate_name`` holds, chosen
    when the step runs: a step never picks a session it cannot act on.
    With ``opened=False`` also a member of the cast with no session yet
    (one to invite)."""

    def options(machine) -> st.SearchStrategy:
        predicate = getattr(machine, predicate_name)
        values = [
            s for s in machine.cast
            if (s in machine.sessions or not opened) and predicate(s)
        ]
        return st.sampled_from(values) if values else st.nothing()

    return st.runner().flatmap(options)


def _movable_task():
    """The label of a task that can move now, chosen when the step runs."""

    def options(machine) -> st.SearchStrategy:
        labels = sorted(a.label for a in machine.w.movable_actors())
        return st.sampled_from(labels) if labels else st.nothing()

    return st.runner().flatmap(options)


def _story_step(step):
    """Record the step, run it, then check the invariants inside it (the
    shrunk program then lists only the story's steps: Hypothesis prints
    every ``@invariant`` call of the final run). A failure carries the
    story that led to it (see :mod:`properties.counterexample`)."""

    @functools.wraps(step)
    def played(self, **arguments):
        self.steps.append(Step(step.__name__, arguments))
        try:
            step(self, **arguments)
            self.check_now()
        except Exception as failure:
            self._attach_counterexample(failure)
            raise

    return played


def _turns(alias: str, turn: str, tag: str = "") -> list:
    """The scripted model turn(s) for ``turn``; ``tag`` makes each call's
    note unique, so the desk can tell which call ran."""
    if turn == "calls GatedAction":
        return [CallTool("GatedAction", {"note": f"{alias} needs approval"})]
    if turn == "calls ExternalJob":
        return [CallTool("ExternalJob", {"note": f"{alias} hands off a job"})]
    if turn == FAILS:
        return [Fail(f"{alias}'s model is unavailable")]
    if turn == BACKGROUND:
        return [CallTool(BACKGROUND_JOB, {"note": f"{alias} {tag} job"})]
    if turn == SEVERAL_CALLS:
        return [
            CallTools(
                (
                    CallTool(BATCH_GATED_ACTION, {"note": f"{alias} {tag} change A"}),
                    CallTool(BATCH_GATED_ACTION, {"note": f"{alias} {tag} change B"}),
                    CallTool(BATCH_EXTERNAL_JOB, {"note": f"{alias} {tag} job C"}),
                    CallTool("ForbiddenAction", {"note": f"{alias} {tag} forbidden D"}),
                ),
            ),
        ]
    return []  # the script's own ending: text, or a report for a worker


class HitlMachine(RuleBasedStateMachine):
    """Users, producers and agentscope's dispatcher acting on parked runs."""

    #: Invariant codes this machine enforces (subclasses narrow it).
    checked: frozenset[str] = frozenset(
        {"I1", "I2", "I3", "I4", "I5", "I6", "I7"},
    )
    #: Turns the models may be scripted with (subclasses narrow it).
    turns: tuple[str, ...] = TURNS
    #: Sessions that exist in the story (subclasses narrow it).
    cast: tuple[str, ...] = (LEADER, WORKER, SOLO)
    #: Where inbox payloads may come from (subclasses narrow it).
    sources: tuple[str, ...] = SOURCES
    #: Sessions the user talks to directly (workers hear from the leader).
    messaged: tuple[str, ...] = (LEADER, SOLO)
    #: Whether the user may also write to a session while it is parked
    #: (off for I1–I7: their stories are the reported bug's).
    parked_messages: bool = False
    #: Whether a run's process may crash.
    crashes: bool = False
    #: Whether bus operations may fail.
    bus_faults: bool = False
    #: Whether the user may press stop (the ``user_interrupts`` rule). The
    #: rule only exists on a machine class that sets this: a rule that is
    #: merely disabled would still change which stories a seed draws.
    interrupts: bool = False
    #: Whether a run's new turn stops while its model is answering (every
    #: model call is then a switch point): the stop button can land
    #: mid-stream, inside the model call.
    streaming: bool = False
    #: Whether leaders may invite any member of their team (the
    #: ``leader_invites_member`` rule): with a cast that has them, a second
    #: worker in the leader's team, and the chief's team beside it.
    several_teams: bool = False
    #: Whether background jobs may finish (the ``background_job_finishes``
    #: rule; the model starts them with the ``starts a background job``
    #: turn).
    background_jobs: bool = False

    #: Flags reported in :meth:`configuration` only when set (so stories
    #: of machines without them keep the names they always had).
    LATER_FLAGS = ("streaming", "several_teams", "background_jobs")

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for flag, rules in OPTIONAL_RULES.items():
            if getattr(cls, flag):
                for optional in rules:
                    setattr(cls, optional.__name__, optional)

    def __init__(self) -> None:
        super().__init__()
        self.w = ControlledWorld()
        self.ledger = Ledger()
        self._markers = itertools.count(1)
        self._previous: Observation | None = None
        self.sessions: dict[str, str] = {}
        self.agents: dict[str, str] = {}
        #: The story so far, as it would be replayed.
        self.steps: list[Step] = []
        self._failed = False
        self.w.setup(self._cast())
        if self.streaming:
            self.w.pause_model_calls()
        self.w.start()

    async def _cast(self) -> None:
        world = self.w.world
        for member, leader in TEAM_OF.items():
            world.script(member).when_empty = (
                CallTool("TeamSay", {"content": "my part is done", "to": leader}),
                Text(f"reported to the {leader}"),
            )
        for alias in (LEADER, SOLO):
            session_id = await world.open_session(alias)
            self._meet(alias, session_id, world.agent_id(alias))
        await world.make_team(LEADER)
        if CHIEF in self.cast:
            session_id = await world.open_session(CHIEF)
            self._meet(CHIEF, session_id, world.agent_id(CHIEF))
            await world.make_team(CHIEF, team_name="band")

    def _meet(self, alias: str, session_id: str, agent_id: str) -> None:
        self.sessions[alias] = session_id
        self.agents[alias] = agent_id
        self.w.name_session(session_id, alias)

    #: Invariants about the settled world; only machines enforcing one of
    #: them pay for settling at the end of every example (the others meet
    #: settled worlds through the ``everything_settles`` rule).
    END_STATE = frozenset({"I5", "I7", "I8", "I9", "I10", "I11", "I12", "I14"})

    #: Invariants about a world settled past every lease (liveness).
    PAST_LEASES = frozenset({"I11"})

    def teardown(self) -> None:
        try:
            if self.checked & self.END_STATE and not self._failed:
                self.steps.append(Step("teardown"))
                try:
                    self._settle()
                    past_leases = bool(self.checked & self.PAST_LEASES)
                    if past_leases:
                        self.w.scheduler.pass_time(PAST_EVERY_LEASE)
                        self._settle()
                    self._check(self.w.observe(settled=True, past_leases=past_leases))
                except Exception as failure:
                    self._attach_counterexample(failure)
                    raise
        finally:
            self.w.close()

    @classmethod
    def configuration(cls) -> dict:
        """What makes this machine class itself: enough to rebuild it."""
        return {
            "enforcing": sorted(cls.checked),
            "cast": list(cls.cast),
            "turns": list(cls.turns),
            "sources": list(cls.sources),
            "messaged": list(cls.messaged),
            "parked_messages": cls.parked_messages,
            "crashes": cls.crashes,
            "bus_faults": cls.bus_faults,
            "interrupts": cls.interrupts,
        } | {flag: True for flag in cls.LATER_FLAGS if getattr(cls, flag)}

    def _attach_counterexample(self, failure: Exception) -> None:
        """Give ``failure`` the story that led to it (once: the innermost
        step that failed wrote it)."""
        self._failed = True
        if getattr(failure, "counterexample", None) is not None:
            return
        import reference_fix  # pylint: disable=import-outside-toplevel

        violated = isinstance(failure, InvariantViolated)
        code = failure.code if violated else "crash"
        failure.counterexample = Counterexample(
            code=code,
            title=failure.title if violated else f"a step raised {type(failure).__name__}",
            statement=invariant_statement(code) if violated else (
                "every step of the story runs without an unexpected exception"
            ),
            # Ids as the trace shows them: a raw id carries the story's
            # number in this process, which depends on what ran before.
            failure=self.w.alias(
                failure.args[0] if violated and failure.args else repr(failure),
            ),
            steps=list(self.steps),
            machine=self.configuration(),
            trace=self.w.render_trace(),
            events=self._published_events(),
            agentscope_version=agentscope_under_test.version(),
            agentscope_path=agentscope_under_test.path(),
            reference_fix=reference_fix.is_applied(),
            error_type=type(failure).__name__,
        )

    def _published_events(self) -> dict[str, list[str]]:
        """Each session's published event kinds, repeats folded."""
        published = {}
        for alias in self.cast:
            if alias not in self.sessions:
                continue
            kinds: list[str] = []
            counts: list[int] = []
            for event in self.w.observe_session(alias).events:
                kind = describe_payload(event)
                if kinds and kinds[-1] == kind:
                    counts[-1] += 1
                else:
                    kinds.append(kind)
                    counts.append(1)
            published[alias] = [
                k if n == 1 else f"{k} ×{n}" for k, n in zip(kinds, counts)
            ]
        return published

    # ── the team ──────────────────────────────────────────────────────

    @precondition(
        lambda self: WORKER in self.cast
        and WORKER not in self.sessions
        and not self._awaiting(LEADER),
    )
    @rule(worker_first_turn=_chosen("turns"))
    @_story_step
    def leader_invites_worker(self, worker_first_turn: str) -> None:
        """The user asks the leader for help; the leader's model calls
        ``AgentInvite``, which mints the worker's session and delivers the
        task into its inbox (queuing a wake-up)."""
        self._invite(WORKER, worker_first_turn)

    def _invite(self, member: str, first_turn: str) -> None:
        """The user asks ``member``'s leader for help, and the leader's
        model invites ``member`` (whose model will do ``first_turn``)."""
        world = self.w.world
        leader = TEAM_OF[member]
        world.script(leader).add(
            CallTool(
                "AgentInvite",
                {"target": world.invite_target(member), "prompt": "Do the chore."},
            ),
            Text(f"the {member} is on it"),
        )
        self._script(member, first_turn)
        self._user_posts(leader, UserMsg(name="user", content="get help"))
        run = self.w.run_of(self.sessions[leader])
        if run is not None:
            self.w.finish(run)
        session_id = self.w.setup(world.team_session_of(member, leader))
        if session_id is not None:
            self._meet(member, session_id, world.agent_id(member))

    # ── users ─────────────────────────────────────────────────────────

    @precondition(lambda self: any(map(self._takes_messages, self.cast)))
    @rule(
        session=_session_where("_takes_messages"),
        model_turn=_chosen("turns"),
    )
    @_story_step
    def user_sends_message(self, session: str, model_turn: str) -> None:
        """A user message through the chat endpoint, which spawns a run
        directly (or answers 409 while one is in flight). The run takes its
        turn (the model does ``model_turn``) and stops at its turn tail."""
        self._script(session, model_turn)
        with self._new_runs_take_their_turn():
            self._user_posts(session, UserMsg(name="user", content="please help"))

    @precondition(lambda self: self._any_open("REQUIRE_USER_CONFIRM"))
    @rule(
        session=_session_where("_asks_confirmation"),
        decision=st.sampled_from(("confirms", "denies")),
        posted_to_leader=st.booleans(),
    )
    @_story_step
    def user_answers_confirmation(
        self,
        session: str,
        decision: str,
        posted_to_leader: bool,
    ) -> None:
        """The user answers a confirmation card. A worker's card is shown
        in the leader's session too; posted there, the endpoint routes the
        answer on to the worker."""
        answered = self._answer(session, "REQUIRE_USER_CONFIRM")
        if answered is None:
            return
        ask, calls = answered
        self._record_confirmations(session, calls, decision == "confirms")
        answer = UserConfirmResultEvent(
            reply_id=ask["reply_id"],
            confirm_results=[
                ConfirmResult(confirmed=decision == "confirms", tool_call=call)
                for call in calls
            ],
        )
        post_to = TEAM_OF.get(session, session) if posted_to_leader else session
        self._user_posts(post_to, answer)

    @precondition(lambda self: self._any_open("REQUIRE_EXTERNAL_EXECUTION"))
    @rule(session=_session_where("_awaits_result"))
    @_story_step
    def external_result_arrives(self, session: str) -> None:
        """The external system posts the result of a submitted job."""
        answered = self._answer(session, "REQUIRE_EXTERNAL_EXECUTION")
        if answered is None:
            return
        ask, calls = answered
        result = ExternalExecutionResultEvent(
            reply_id=ask["reply_id"],
            execution_results=[
                ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output="the job finished",
                    state=ToolResultState.SUCCESS,
                )
                for call in calls
            ],
        )
        self._user_posts(session, result)

    def _interrupts(self, session: str) -> None:
        """The body of ``user_interrupts`` (see :data:`OPTIONAL_RULES`)."""
        if session not in self.sessions:
            return
        self.ledger.interrupt(self.w.observe_session(session))
        self.w.act(self._press_stop(session), f"user interrupts {session}")

    async def _press_stop(self, session: str) -> None:
        """POST /sessions/{id}/interrupt as the user, through agentscope's
        route function."""
        try:
            await interrupt_session(
                self.sessions[session],
                agent_id=self.agents[session],
                user_id=self.w.world.user_id,
                chat_service=self.w.world.chat_service,
            )
        except HTTPException as refused:
            if refused.status_code != 404:
                raise

    # ── producers ─────────────────────────────────────────────────────

    @rule(
        source=_chosen("sources"),
        to=_session_where("_exists"),
    )
    @_story_step
    def payload_arrives(self, source: str, to: str) -> None:
        """A team message, a channel message or a background-task result
        lands in a session's inbox through ``deliver_to_inbox``."""
        if to not in self.sessions:
            return
        marker = f"payload-{next(self._markers)} from {source}"
        hint = HintBlock(
            hint=marker,
            source=json.dumps({"label": source, "sublabel": "harness"}),
        )
        self.ledger.deliver(to, marker)
        self.w.act(
            deliver_to_inbox(
                self.w.bus,
                user_id=self.w.world.user_id,
                session_id=self.sessions[to],
                agent_id=self.agents[to],
                payload=hint.model_dump(mode="json"),
            ),
            f"{source} delivers to {to}",
        )

    # ── agentscope's own parties ──────────────────────────────────────

    @precondition(lambda self: self._any_run())
    @rule(session=_session_where("_has_run"))
    @_story_step
    def run_reaches_turn_tail(self, session: str) -> None:
        """The session's run goes on until its next turn ends and it is
        about to check its inbox (the turn tail), and stops there."""
        run = self._run(session)
        if run is not None:
            self.w.step(run)
            self._to_turn_tail(session, run)

    @precondition(lambda self: self._any_run())
    @rule(session=_session_where("_has_run"))
    @_story_step
    def run_continues(self, session: str) -> None:
        """The session's run goes on until it ends or must wait."""
        run = self._run(session)
        if run is not None:
            self.w.finish(run)

    @precondition(lambda self: self._dispatcher_has_work())
    @rule()
    @_story_step
    def dispatcher_processes_queue(self) -> None:
        """The wake-up dispatcher drains its trigger queue: it spawns runs
        (each takes its turn and stops at its turn tail), drops wake-ups of
        parked sessions, re-queues triggers of busy ones after a backoff."""
        dispatcher = self.w.dispatcher()
        if dispatcher is not None:
            with self._new_runs_take_their_turn():
                self.w.finish(dispatcher)

    @precondition(lambda self: bool(self.w.movable_actors()))
    @rule(task=_movable_task())
    @_story_step
    def one_task_takes_a_step(self, task: str) -> None:
        """The interleaving choice: any task that can move takes one bus
        operation's worth of steps."""
        actor = next((a for a in self.w.movable_actors() if a.label == task), None)
        if actor is not None:
            self.w.step(actor)

    @precondition(lambda self: self.w.loop.next_timer_deadline() is not None)
    @rule(seconds=st.sampled_from(DURATIONS))
    @_story_step
    def time_passes(self, seconds: float) -> None:
        """Virtual time passes: backoff retries fire, leases may expire."""
        self.w.scheduler.pass_time(seconds)

    @rule()
    @_story_step
    def everything_settles(self) -> None:
        """Every task runs to its end, with time passing as needed."""
        self._settle()

    # ── invariants ────────────────────────────────────────────────────

    def check_now(self) -> None:
        """Every enforced invariant, against the world as it is now."""
        self._check(self.w.observe(settled=self._settled()))

    def _check(self, obs: Observation) -> None:
        for check in STEP_INVARIANTS:
            self._enforce(lambda c=check: c(obs, self.ledger))
        before = self._previous
        self._enforce(lambda: parked_stays_parked(before, obs, self.ledger))
        self._previous = obs

    def _enforce(self, check) -> None:
        try:
            check()
        except InvariantViolated as violation:
            if violation.code in self.checked:
                violation.trace = self.w.render_trace()
                tail = violation.trace.splitlines()[-TRACE_TAIL:]
                violation.add_note(
                    f"Bus operations up to the violation (last {len(tail)}, "
                    "by task):\n" + "\n".join(tail),
                )
                raise

    def _settle(self) -> None:
        """Settle the world; one that never settles breaks liveness (I11)."""
        try:
            self.w.settle()
        except WorldDidNotSettle as stuck:

            def never_settles():
                raise InvariantViolated(
                    "I11",
                    "nothing waits forever",
                    "the world settles: every trigger is eventually "
                    "dispatched or dropped",
                    str(stuck),
                )

            self._enforce(never_settles)
            raise

    def _settled(self) -> bool:
        return (
            not self.w.scheduler.parked()
            and self.w.loop.next_timer_deadline() is None
        )

    # ── helpers ───────────────────────────────────────────────────────

    def _script(self, session: str, turn: str) -> None:
        """Queue ``session``'s next model turn; a failing one is a fault."""
        self.w.world.script(session).add(
            *_turns(session, turn, tag=f"turn-{next(self._markers)}"),
        )
        if turn == FAILS:
            self.ledger.faults.add(session)

    def _run(self, session: str):
        if session not in self.sessions:
            return None
        return self.w.run_of(self.sessions[session])

    def _to_turn_tail(self, session: str, run) -> None:
        """Move a run until it is about to check its inbox (the turn tail),
        ends, or must wait for another party."""
        tail = MessageBusKeys.inbox_lock(self.sessions[session])
        self.w.finish(
            run,
            stop=lambda r: r.parked
            and r.pending is not None
            and r.pending.name == "acquire_lock"
            and r.pending.key == tail,
        )

    def _to_model_call(self, run) -> None:
        """Move a run until its model is answering (or it ends, or must
        wait for another party)."""
        self.w.finish(
            run,
            stop=lambda r: any(
                t.parked and t.pending.name == "model_call"
                for t in self.w.working_for(r)
            ),
        )

    @contextlib.contextmanager
    def _new_runs_take_their_turn(self):
        """Runs spawned inside the block take their first turn, up to its
        tail: a turn is one step of a story, the turn tail (the inbox
        hand-off's critical section) is where interleavings matter. On a
        streaming machine they stop earlier, while their model answers."""
        spawned = len(self.w.world.registry.spawned)
        yield
        for task in self.w.world.registry.spawned[spawned:]:
            session = next(
                (a for a, sid in self.sessions.items() if self.w.world.registry.get(sid) is task),
                None,
            )
            run = self.w.run_of(self.sessions[session]) if session else None
            if run is not None and self.streaming:
                self._to_model_call(run)
            elif run is not None:
                self._to_turn_tail(session, run)

    def _user_posts(self, session: str, payload) -> bool:
        """POST /chat/ as the user, through agentscope's endpoint; whether
        the endpoint refused it (409: a run is in flight)."""
        request = ChatRequest(
            agent_id=self.agents[session],
            session_id=self.sessions[session],
            input=payload,
        )
        posted = self.w.act(self._post(request), f"user posts to {session}")
        return posted.task.done() and posted.task.result()

    async def _post(self, request: ChatRequest) -> bool:
        try:
            await chat_endpoint(
                request,
                user_id=self.w.world.user_id,
                chat_service=self.w.world.chat_service,
                chat_run_registry=self.w.world.registry,
                message_bus=self.w.bus,
            )
        except HTTPException as refused:
            if refused.status_code != 409:
                raise
            return True
        return False

    def _answer(
        self,
        session: str,
        kind: str,
    ) -> tuple[dict, list[ToolCallBlock]] | None:
        """The open request of ``kind`` and its calls, recorded as answered
        in the ledger (the caller posts the answer)."""
        ask = self._open_request(session, kind)
        if ask is None:
            return None
        calls = [ToolCallBlock.model_validate(c) for c in ask["tool_calls"]]
        for call in calls:
            self.ledger.decide(session, call.id)
        return ask, calls

    def _record_confirmations(self, session: str, calls, confirmed: bool) -> None:
        for call in calls:
            note = json.loads(call.input or "{}").get("note", "")
            self.ledger.confirm(session, call.id, note, confirmed)

    def _open_request(self, session: str, kind: str) -> dict | None:
        """The newest request of ``kind`` in the session's current parked
        reply whose calls nobody answered (a turn with several calls asks
        once per call, and the user may answer them one at a time)."""
        if session not in self.sessions:
            return None
        events = self.w.bus.appended.get(
            MessageBusKeys.session_events(self.sessions[session]),
            [],
        )
        requests = [e for e in events if e.get("type") in REQUEST_EVENTS]
        if not requests:
            return None
        current = requests[-1].get("reply_id")
        decided = set(self.ledger.decisions.get(session, []))
        for event in reversed(requests):
            if event.get("reply_id") != current:
                return None
            calls = [c["id"] for c in event.get("tool_calls", [])]
            if event.get("type") == kind and calls and not set(calls) & decided:
                return event
        return None

    def _asks_confirmation(self, session: str) -> bool:
        return self._open_request(session, "REQUIRE_USER_CONFIRM") is not None

    def _awaits_result(self, session: str) -> bool:
        return self._open_request(session, "REQUIRE_EXTERNAL_EXECUTION") is not None

    def _has_run(self, session: str) -> bool:
        return self._run(session) is not None

    def _takes_messages(self, session: str) -> bool:
        return session in self.messaged and not self._awaiting(session)

    def _crashable(self, session: str) -> bool:
        """A live run, stopped at a bus operation with all its helpers."""
        run = self._run(session)
        if run is None or not run.parked:
            return False
        return all(r.parked for r in self.w.working_for(run))

    def _invitable(self, member: str) -> bool:
        """Not invited yet, and its leader is free to ask for help."""
        leader = TEAM_OF.get(member)
        return (
            leader is not None
            and member in self.cast
            and member not in self.sessions
            and leader in self.sessions
            and not self._awaiting(leader)
        )

    def _has_running_job(self, session: str) -> bool:
        return session in self.sessions and bool(
            self.w.world.desk.running_jobs(self.sessions[session]),
        )

    def _writable_while_parked(self, session: str) -> bool:
        return session in self.messaged and session in self.sessions and self._awaiting(session)

    def _exists(self, session: str) -> bool:
        return session in self.sessions

    def _interruptible(self, session: str) -> bool:
        """A session the user talks to directly (a worker's stop button
        is not the user's: its card shows in the leader's session, whose
        interrupt agentscope does not route on) with a run alive
        (streaming, or at its turn tail) or parked: there is something for
        the stop button to stop."""
        return session in self.messaged and (
            self._has_run(session) or self._awaiting(session)
        )

    def _any_open(self, kind: str) -> bool:
        return any(self._open_request(s, kind) for s in self.sessions)

    def _any_run(self) -> bool:
        return any(self._run(s) is not None for s in self.sessions)

    def _dispatcher_has_work(self) -> bool:
        dispatcher = self.w.dispatcher()
        return dispatcher is not None and dispatcher.parked

    def _awaiting(self, session: str) -> bool:
        """Parked, or waiting for an answer to be applied. A new message
        to such a session is a different story (left out of this machine:
        agentscope's agent rejects it by design)."""
        if any(
            self._open_request(session, kind)
            for kind in REQUEST_EVENTS
        ):
            return True
        if session not in self.sessions:
            return False
        view = self.w.observe_session(session)
        return view.parked_status != "idle"


# ── rules only some properties need ───────────────────────────────────
#
# Each exists only on a machine class whose flag turns it on (see
# ``HitlMachine.__init_subclass__``): a rule that is merely disabled by a
# precondition would still change which stories a seed draws for the
# properties that do not use it.


@precondition(lambda self: any(map(self._interruptible, self.cast)))
@rule(session=_session_where("_interruptible"))
@_story_step
def user_interrupts(self: HitlMachine, session: str) -> None:
    """The user presses stop: agentscope's interrupt route, which publishes
    on the interrupt channel while a run holds the session lock (the cancel
    dispatcher then cancels the run) and otherwise queues a resume trigger
    carrying the interrupt (the wake-up dispatcher runs it). Sent while a
    run is alive or the session is parked; recorded in the ledger with what
    the session was doing at that moment."""
    self._interrupts(session)  # pylint: disable=protected-access


@precondition(lambda self: any(map(self._writable_while_parked, self.cast)))
@rule(
    session=_session_where("_writable_while_parked"),
    via=st.sampled_from(("chat endpoint", "channel")),
)
@_story_step
def user_messages_parked_session(self: HitlMachine, session: str, via: str) -> None:
    """The user writes to a session whose agent waits for a confirmation
    or an external result, as a real client can: through the chat
    endpoint (a direct run, or 409 while a run is still registered), or
    from a channel, whose gateway queues a ``message`` trigger for the
    dispatcher when no run holds the session."""
    if not self._writable_while_parked(session):
        return
    marker = f"message-{next(self._markers)} while parked"
    message = UserMsg(name="user", content=marker)
    if via == "chat endpoint":
        refused = self._user_posts(session, message)
    elif self._run(session) is None:
        refused = False
        self.w.act(
            enqueue_run_trigger(
                self.w.bus,
                self.w.world.user_id,
                self.sessions[session],
                self.agents[session],
                kind="message",
                inputs=message,
            ),
            f"channel posts to {session}",
        )
    else:
        return  # the gateway would deliver a hint instead: payload_arrives
    self.ledger.message_while_parked(session, marker, refused)


@precondition(lambda self: any(map(self._crashable, self.cast)))
@rule(session=_session_where("_crashable"))
@_story_step
def process_crashes(self: HitlMachine, session: str) -> None:
    """The process running the session's run dies (killed for memory,
    a redeploy): no cleanup runs. Its session lock and inbox-consumer
    registration stay until their leases run out; the dispatcher and
    every producer, in other processes, carry on."""
    if not self._crashable(session):
        return
    self.w.crash(self._run(session))
    self.ledger.faults.add(session)
    self.ledger.crashed.add(session)


@rule(
    operation=st.sampled_from(sorted(BUS_FAULTS)),
    session=_session_where("_exists"),
)
@_story_step
def bus_operation_fails(self: HitlMachine, operation: str, session: str) -> None:
    """The next time anyone makes ``operation`` on the session's key,
    the bus fails it (a dropped connection, a failover)."""
    if session not in self.sessions:
        return
    name, key_of = BUS_FAULTS[operation]
    self.w.bus.fail_next(name, key_of(self.sessions[session]))
    self.ledger.faults.add(session)


@precondition(lambda self: any(map(self._invitable, self.cast)))
@rule(member=_session_where("_invitable", opened=False), first_turn=_chosen("turns"))
@_story_step
def leader_invites_member(self: HitlMachine, member: str, first_turn: str) -> None:
    """The user asks a team's leader for help; its model calls
    ``AgentInvite`` for ``member``, which mints the member's session in
    that team and delivers the task into its inbox. With several teams and
    workers, members of both teams work, fail and report at once."""
    if self._invitable(member):  # pylint: disable=protected-access
        self._invite(member, first_turn)  # pylint: disable=protected-access


@precondition(lambda self: any(map(self._has_running_job, self.cast)))
@rule(session=_session_where("_has_running_job"))
@_story_step
def background_job_finishes(self: HitlMachine, session: str) -> None:
    """The oldest running background job of the session finishes. If
    agentscope has moved it to the background by then, its deliverer
    (a task of its own) queues the result in the session's inbox and wakes
    the session; otherwise the result goes straight to the waiting run."""
    if not self._has_running_job(session):  # pylint: disable=protected-access
        return
    note = self.w.world.desk.running_jobs(self.sessions[session])[0]
    self.ledger.job_finished(session, note)
    self.w.world.desk.finish_job(note)
    self.w.scheduler.quiesce()


#: The rules each flag turns on; module functions, not methods, so that a
#: machine without the flag has no trace of them.
OPTIONAL_RULES = {
    "interrupts": (user_interrupts,),
    "parked_messages": (user_messages_parked_session,),
    "crashes": (process_crashes,),
    "bus_faults": (bus_operation_fails,),
    "several_teams": (leader_invites_member,),
    "background_jobs": (background_job_finishes,),
}
del user_interrupts, user_messages_parked_session, process_crashes, bus_operation_fails
del leader_invites_member, background_job_finishes


def machine_enforcing(*codes: str, **narrowing) -> type[HitlMachine]:
    """A :class:`HitlMachine` that enforces only ``codes`` (and optionally
    narrows ``turns`` or ``cast``, or turns on ``interrupts``)."""
    name = "HitlMachine_" + "_".join(codes)
    return type(name, (HitlMachine,), {"checked": frozenset(codes), **narrowing})

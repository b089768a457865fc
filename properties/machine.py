"""The stateful machine: stories of parked human-in-the-loop runs.

Each Hypothesis example builds a fresh :class:`~harness.world.world.World`
(a team leader, an invitable worker, a solo session, and on machines with
``several_teams`` a second worker and a second team; see
:mod:`harness.world.cast`) and plays a story against it, one rule at a time.
The rules live in :mod:`properties.rules`, one module per party; this
module composes them, checks the properties of :mod:`properties.catalog`
after every step (and at the end, once the world has settled), and gives a
failure the story that led to it.

Rules some properties need exist only on machines whose flag turns them on
(:data:`OPTIONAL_RULES`): a rule that is merely disabled by a precondition
would still change which stories a seed draws for the others.
"""
from __future__ import annotations

import itertools
from collections import Counter

from hypothesis.stateful import RuleBasedStateMachine

from harness.kernel.interleaver import DidNotSettle
from harness.world.cast import CHIEF, LEADER, SOLO, WORKER
from harness.world.deployment import Deployment
from harness.world.observation import Observation
from harness.world.world import World

from . import reach, rule_choice, windows
from .catalog import BY_CODE, ON_TRANSITION, PAST_LEASES
from .ledger import Ledger
from .rules.agentscope_parties import AgentscopeRules
from .rules.background import BackgroundJobs
from .rules.faults import BusFaults, Crashes, NodeCrashes, StorageFaults
from .rules.operators import Restarts, SessionDeletes
from .rules.producers import LateWakeups, ProducerRules, StepwiseDeliveries
from .rules.questions import Questions
from .rules.story_rule import ON_SEVERAL_NODES
from .rules.teams import SeveralTeams, TeamRules
from .rules.users import CleanUpStops, Interrupts, ParkedMessages, UserRules
from .invariants.safety import LastParked
from .rules.vocabulary import PAST_EVERY_LEASE, SOURCES, TURNS, scripted_turns
from .story.record import Step
from .story.witness import describe_failure
from .violation import InvariantViolated, UnexpectedFailure

#: How many of the last bus operations a failure's note shows.
TRACE_TAIL = 40

#: Violations of properties a machine was not built to search, found on
#: the way: the first story of each code since the last :func:`clear`
#: (the pytest plugin clears it before each property test and reports it
#: after: the property's verdict stays its own, and what else broke is
#: said beside it).
FOUND_ON_THE_WAY: dict = {}

#: Per property searched in this process: how often its stories reached
#: each of its windows (cleared when its test starts).
WINDOWS_REACHED: dict[str, Counter] = {}

#: Per property searched in this process: in how many of its stories each
#: order of two parties' hand-off operations occurred (:mod:`.reach`;
#: cleared with the windows).
PAIRS_REACHED: dict[str, Counter] = {}

#: The deployment :func:`machine_for` builds stories on (the pytest
#: plugin's ``--hitl-bus`` and ``--hitl-nodes`` set it).
DEPLOYMENT = Deployment()


def use_deployment(deployment: Deployment) -> None:
    """Search on ``deployment`` from now on."""
    global DEPLOYMENT  # pylint: disable=global-statement
    DEPLOYMENT = deployment


#: Called as each story ends, with the properties it searched and whether
#: it failed (the pytest plugin reports a search's progress through it: a
#: failed story means the suite goes on to shrink it, whose replays end
#: here too).
STORY_ENDED: list = []

#: The rules each flag turns on.
OPTIONAL_RULES: dict[str, type] = {
    "interrupts": Interrupts,
    "parked_messages": ParkedMessages,
    "crashes": Crashes,
    "bus_faults": BusFaults,
    "several_teams": SeveralTeams,
    "background_jobs": BackgroundJobs,
    "late_wakeups": LateWakeups,
    "stepwise_deliveries": StepwiseDeliveries,
    "restarts": Restarts,
    "storage_faults": StorageFaults,
    "deletes": SessionDeletes,
    "clean_up_stops": CleanUpStops,
}

class HitlMachine(
    UserRules, ProducerRules, TeamRules, AgentscopeRules, Questions, RuleBasedStateMachine,
):
    """Users, producers and agentscope's dispatcher acting on parked runs."""

    #: Property codes this machine enforces (subclasses narrow it).
    checked: frozenset[str] = frozenset({"I1", "I2", "I3", "I4", "I5", "I6", "I7"})
    #: Turns the models may be scripted with (subclasses narrow it).
    turns: tuple[str, ...] = TURNS
    #: Sessions that exist in the story (subclasses narrow it).
    cast: tuple[str, ...] = (LEADER, WORKER, SOLO)
    #: Where inbox payloads may come from (subclasses narrow it).
    sources: tuple[str, ...] = SOURCES
    #: Sessions the user talks to directly (workers hear from the leader).
    messaged: tuple[str, ...] = (LEADER, SOLO)
    #: Flags: each turns on the rules of :data:`OPTIONAL_RULES` (and
    #: ``streaming`` stops new runs while their model is answering, so the
    #: stop button can land mid-stream).
    parked_messages: bool = False
    crashes: bool = False
    bus_faults: bool = False
    interrupts: bool = False
    streaming: bool = False
    several_teams: bool = False
    background_jobs: bool = False
    late_wakeups: bool = False
    stepwise_deliveries: bool = False
    restarts: bool = False
    storage_faults: bool = False
    deletes: bool = False
    clean_up_stops: bool = False
    #: The deployment: which bus, how many nodes (see
    #: :class:`~harness.world.deployment.Deployment`).
    bus: str = "fake"
    nodes: int = 1

    #: Flags reported in :meth:`configuration` only when set (so stories
    #: of machines without them keep the names they always had).
    LATER_FLAGS = ("streaming", "several_teams", "background_jobs", "late_wakeups", "restarts", "storage_faults", "deletes",
                   "stepwise_deliveries", "clean_up_stops")

    def __init__(self) -> None:
        super().__init__()
        rule_choice.install(self)
        self.world = World(Deployment(self.bus, self.nodes))
        self.ledger = Ledger()
        self._markers = itertools.count(1)
        self._last_parked = LastParked()
        #: The properties this machine searches come first: at a step that
        #: breaks several, the searched one is the one reported.
        #: A property whose subject the release lacks is not checked.
        self._check_order = sorted(
            (r for r in BY_CODE.values() if r.not_applicable() is None),
            key=lambda r: r.code not in self.checked,
        )
        #: The story so far, as it would be replayed.
        self.steps: list[Step] = []
        #: Set when playing a recorded story back: each step first checks
        #: that it still applies.
        self.playing_back = False
        self._failed = False
        self.world.open_cast(with_chief=CHIEF in self.cast)
        if self.streaming:
            self.world.pause_model_calls()
        self.world.start()

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
        } | {flag: True for flag in cls.LATER_FLAGS if getattr(cls, flag)} | Deployment(
            cls.bus, cls.nodes,
        ).configuration()

    # ── what rules share ──────────────────────────────────────────────

    def next_marker(self) -> int:
        """A number no other payload, message or turn of the story has."""
        return next(self._markers)

    def script(self, session: str, turn: str) -> None:
        """Queue ``session``'s next model turn (a failing one is a fault,
        which excuses the session once it is served)."""
        self.world.script(session, *scripted_turns(session, turn, tag=f"turn-{self.next_marker()}"))

    def settle(self) -> None:
        """Settle the world; one that keeps busy, repeats itself or never
        comes to rest breaks bounded work (I17)."""
        try:
            self.world.settle()
        except DidNotSettle as busy:
            self.ledger.restless.append(self.world.alias(f"{type(busy).__name__}: {busy}"))
            try:
                BY_CODE["I17"].verify(Observation(), self.ledger)
            except InvariantViolated as violation:
                self._report(violation)
            raise

    # ── checking ──────────────────────────────────────────────────────

    def check_now(self) -> None:
        """Every enforced property, against the world as it is now."""
        self._check(self.world.observe(settled=self.world.is_settled()))

    def _check(self, obs: Observation) -> None:
        """Every property against ``obs``; first the world's own news: the
        faults that fired (they excuse the sessions they touched), and any
        exception no rule injected (it fails the story)."""
        self.ledger.faults |= self.world.faulted_sessions()
        unexpected = self.world.unexpected_failures()
        if unexpected:
            self._report(UnexpectedFailure(unexpected))
        before = self._last_parked.before()
        for record in self._check_order:
            if record.when == ON_TRANSITION:
                self._enforce(lambda r=record: r.verify(before, obs, self.ledger))
            else:
                self._enforce(lambda r=record: r.verify(obs, self.ledger))
        self._last_parked.update(obs)

    def _enforce(self, check) -> None:
        """Run ``check``; what it finds is :meth:`_report`-ed."""
        try:
            check()
        except (InvariantViolated, UnexpectedFailure) as violation:
            self._report(violation)

    def _report(self, violation: InvariantViolated | UnexpectedFailure) -> None:
        """Raise ``violation`` with the bus operations leading to it as a
        note. A violation of a property this machine was not built to
        search is not raised but not dropped either: the first of each is
        written down in :data:`FOUND_ON_THE_WAY`, and the story goes on."""
        code = getattr(violation, "code", None)
        if code is not None and code not in self.checked:
            if code not in FOUND_ON_THE_WAY:
                FOUND_ON_THE_WAY[code] = describe_failure(self, violation)
            return
        violation.trace = self.world.render_trace()
        tail = violation.trace.splitlines()[-TRACE_TAIL:]
        violation.add_note(
            f"Bus operations up to the violation (last {len(tail)}, "
            "by task):\n" + "\n".join(tail),
        )
        raise violation

    def teardown(self) -> None:
        try:
            at_rest = {c for c in self.checked if c in BY_CODE and BY_CODE[c].at_rest}
            if at_rest and not self._failed:
                self.steps.append(Step("teardown"))
                try:
                    self.settle()
                    past_leases = any(BY_CODE[c].when == PAST_LEASES for c in at_rest)
                    if past_leases:
                        self.world.pass_time(PAST_EVERY_LEASE)
                        self.settle()
                    self._check(self.world.observe(settled=True, past_leases=past_leases))
                except Exception as failure:
                    self.attach_counterexample(failure)
                    raise
        finally:
            self._count_windows()
            self.world.close()
            for listener in STORY_ENDED:
                listener(self.checked, self._failed)

    def _count_windows(self) -> None:
        """Add this story's reached windows and hand-off orders to each
        searched property's."""
        story = windows.Story.played(self.world, self.ledger)
        orders = reach.story_orders(story.entries, story.sessions)
        for code in self.checked:
            if code in BY_CODE:
                reached = windows.count(story, BY_CODE[code].windows)
                WINDOWS_REACHED.setdefault(code, Counter()).update(reached)
                PAIRS_REACHED.setdefault(code, Counter()).update(orders)

    def attach_counterexample(self, failure: Exception) -> None:
        """Give ``failure`` the story that led to it (once: the innermost
        step that failed wrote it)."""
        self._failed = True
        if getattr(failure, "counterexample", None) is None:
            failure.counterexample = describe_failure(self, failure)


def machine_name(codes) -> str:
    """The name of the machine class enforcing ``codes`` (a shrunk story's
    program names it as Hypothesis names the class it ran)."""
    return "HitlMachine_" + "_".join(codes)


def machine_enforcing(*codes: str, **narrowing) -> type[HitlMachine]:
    """A :class:`HitlMachine` that enforces only ``codes`` (and optionally
    narrows ``turns`` or ``cast``, or sets flags, which bring their rules)."""
    flags = {**{f: getattr(HitlMachine, f) for f in OPTIONAL_RULES}, **narrowing}
    mixins = tuple(rules for flag, rules in OPTIONAL_RULES.items() if flags.get(flag))
    several_nodes = narrowing.get("nodes", 1) > 1
    if flags.get("crashes") and several_nodes:
        mixins = (NodeCrashes, *mixins)
    bases = (*mixins, HitlMachine)
    choosing_nodes = {
        name: played for name, played in ON_SEVERAL_NODES.items()
        if several_nodes and any(hasattr(base, name) for base in bases)
    }
    name = machine_name(codes)
    return type(name, bases, {"checked": frozenset(codes), **narrowing, **choosing_nodes})


def machine_for(code: str) -> type[HitlMachine]:
    """The machine that searches property ``code``, as its catalog record
    says, on the deployment in use."""
    machine = dict(BY_CODE[code].machine)
    if DEPLOYMENT.bus == "redis":
        # Deliveries held part-way across a real server's round trips do
        # not yet replay identically (I3's search broke on Hypothesis'
        # FlakyStrategyDefinition): Redis mode searches without them.
        machine.pop("stepwise_deliveries", None)
    return machine_enforcing(code, **machine, bus=DEPLOYMENT.bus, nodes=DEPLOYMENT.nodes)

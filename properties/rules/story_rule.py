"""``@story_rule``: a Hypothesis rule that is also a step of a story.

Each rule is declared once, with everything that belongs to it:

- ``when``: its precondition (Hypothesis' ``@precondition``);
- its arguments, as :class:`Where` (a session for which one of the
  machine's questions holds, chosen when the step runs), :class:`Chosen`
  (one of the machine's own values, e.g. its ``turns``), :class:`Movable`
  (a task that can move now), or any Hypothesis strategy;
- ``says``: its sentence in a counterexample report, filled with the step's
  arguments.

The step records itself in the machine's story, runs, then has the machine
check its invariants; a failure carries the story that led to it. Played
back from a recorded story (:mod:`properties.story.playback`), a step first
checks that it still applies, and says which part does not.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ..story.record import Step


class StepDoesNotApply(Exception):
    """A recorded step cannot be played in the world as it now is."""


class Refusal(str):
    """Why a step cannot be played; ``diverged`` when the reason is the
    world's state (agentscope went another way), not the story's text."""

    diverged: bool = False

    @classmethod
    def by_world(cls, reason: str) -> Refusal:
        refusal = cls(reason)
        refusal.diverged = True
        return refusal


class StoryDiverged(StepDoesNotApply):
    """A recorded step's rule exists, but agentscope did not reach the state
    it needs (a fixed release stops a job the story later finishes): the
    story cannot go on the way it failed."""


@dataclass(frozen=True)
class Where:
    """A session for which the machine's question ``question`` holds (with
    ``opened=False`` also a member of the cast with no session yet). With
    ``favour`` (another question), at least half the draws pick among the
    sessions for which that one holds too, when some but not all do: a delivery
    favours a session whose run is live, where a payload can meet it (a
    random search then met F1 after a median of 15.5 stories, not 36, before
    the rule draw of :mod:`properties.rule_choice`)."""

    question: str
    opened: bool = True
    favour: str | None = None

    def choices(self, machine) -> tuple[list[str], list[str]]:
        """The sessions it may name now, and the favoured ones among them."""
        holds = getattr(machine, self.question)
        values = [
            s for s in machine.cast
            if (machine.world.sessions.get(s) or not self.opened) and holds(s)
        ]
        favoured = [s for s in values if self.favour and getattr(machine, self.favour)(s)]
        return values, favoured

    def strategy(self) -> st.SearchStrategy:
        def options(machine) -> st.SearchStrategy:
            values, favoured = self.choices(machine)
            if not values:
                return st.nothing()
            if favoured and len(favoured) < len(values):
                return st.one_of(st.sampled_from(favoured), st.sampled_from(values))
            return st.sampled_from(values)

        return st.runner().flatmap(options)

    def refusal(self, machine, value) -> str | None:
        if value not in machine.cast:
            return f"{value!r} is not in the story's cast {list(machine.cast)}"
        if self.opened and value not in machine.world.sessions:
            return Refusal.by_world(f"{value} has no session")
        if not getattr(machine, self.question)(value):
            return Refusal.by_world(f"{self.question.lstrip('_')}({value!r}) is false")
        return None


@dataclass(frozen=True)
class Chosen:
    """One of the machine's own ``attribute`` values: subclasses narrow a
    scenario by narrowing the attribute, and the shrunk program still shows
    the real argument. A machine with ``favoured_<attribute>`` (some of
    those values) draws among them at least half the time, as :class:`Where`
    favours: a property's search aims at its finding without losing the
    other values (a machine without it draws exactly as before)."""

    attribute: str

    def strategy(self) -> st.SearchStrategy:
        def options(machine) -> st.SearchStrategy:
            values = list(getattr(machine, self.attribute))
            if not values:
                return st.nothing()
            favoured = [v for v in getattr(machine, f"favoured_{self.attribute}", ()) if v in values]
            if favoured and len(favoured) < len(values):
                return st.one_of(st.sampled_from(favoured), st.sampled_from(values))
            return st.sampled_from(values)

        return st.runner().flatmap(options)

    def refusal(self, machine, value) -> str | None:
        values = getattr(machine, self.attribute)
        if value not in values:
            return f"{value!r} is not one of the machine's {self.attribute} {list(values)}"
        return None


@dataclass(frozen=True)
class Movable:
    """The label of a task that can move now."""

    def strategy(self) -> st.SearchStrategy:
        def options(machine) -> st.SearchStrategy:
            labels = machine.world.movable_tasks()
            return st.sampled_from(labels) if labels else st.nothing()

        return st.runner().flatmap(options)

    def refusal(self, machine, value) -> str | None:
        movable = machine.world.movable_tasks()
        if value not in movable:
            return Refusal.by_world(f"task {value!r} cannot move (movable: {movable})")
        return None


@dataclass(frozen=True)
class OnNode:
    """The node (process) that serves an action: one of the world's
    ``among`` (a method returning node numbers). Drawn and recorded only by
    machines of several nodes (:data:`ON_SEVERAL_NODES`): in a one-node
    story it is absent, and the story stays as it was before nodes existed."""

    among: str = "live_nodes"
    #: May be missing from a recorded step (a one-node story).
    optional = True

    def strategy(self) -> st.SearchStrategy:
        def options(machine) -> st.SearchStrategy:
            values = getattr(machine.world, self.among)()
            return st.sampled_from(values) if values else st.nothing()

        return st.runner().flatmap(options)

    def refusal(self, machine, value) -> str | None:
        if value is None:
            return None if machine.nodes == 1 else "no node is named in a story of several nodes"
        if not 0 <= value < machine.nodes:
            return f"node {value!r} is not one of the story's {machine.nodes} nodes"
        if value not in getattr(machine.world, self.among)():
            return Refusal.by_world(f"node {value} is not one of {self.among.replace('_', ' ')}")
        return None


def recorded(arguments: dict, kinds: dict) -> dict:
    """A step's arguments as its story records them: an optional argument
    that was not drawn (``None``) is left out."""
    return {
        name: value for name, value in arguments.items()
        if not (value is None and getattr(kinds.get(name), "optional", False))
    }


@dataclass(frozen=True)
class RuleSpec:
    """What the registry knows of one rule."""

    name: str
    says: Callable[..., str]
    when: Callable | None = None
    arguments: dict = field(default_factory=dict)

    def refusal(self, machine, arguments: dict) -> str | None:
        """Why this step cannot be played now, or ``None``."""
        if self.when is not None and not self.when(machine):
            return Refusal.by_world("its precondition is false")
        for name, kind in self.arguments.items():
            if name not in arguments:
                if getattr(kind, "optional", False):
                    continue
                return f"argument {name!r} is missing"
            refusal = getattr(kind, "refusal", None)
            reason = refusal(machine, arguments[name]) if refusal else None
            if reason:
                return reason
        unknown = sorted(set(arguments) - set(self.arguments))
        return f"unknown argument(s) {unknown}" if unknown else None


#: Every story rule by name (its sentence, precondition and arguments);
#: ``teardown`` is Hypothesis' own end of a story.
RULES: dict[str, RuleSpec] = {
    "teardown": RuleSpec(
        "teardown",
        says=lambda: (
            "The story ends: the world settles (for liveness, past every lease) "
            "and is checked."
        ),
    ),
}


#: The version of each rule that also chooses a node, by name: a machine
#: of several nodes takes these (see :func:`properties.machine.machine_enforcing`).
#: A one-node machine's rules draw exactly what they drew before nodes
#: existed, so its searches and stories stay as they were.
ON_SEVERAL_NODES: dict[str, Callable] = {}


def story_rule(*, says: Callable[..., str], when: Callable | None = None, **arguments):
    """Declare a rule: precondition, arguments, sentence and body."""

    def declare(body):
        spec = RuleSpec(body.__name__, says, when, arguments)
        RULES[body.__name__] = spec

        def step(strategies: dict) -> Callable:
            @functools.wraps(body)
            def played(self, **given):
                if self.playing_back:
                    reason = spec.refusal(self, given)
                    if reason is not None:
                        kind = StoryDiverged if getattr(reason, "diverged", False) else StepDoesNotApply
                        raise kind(f"step {len(self.steps) + 1}: rule {spec.name} does not apply: {reason}")
                self.steps.append(Step(body.__name__, recorded(given, arguments)))
                try:
                    body(self, **given)
                    self.check_now()
                except Exception as failure:
                    self.attach_counterexample(failure)
                    raise

            declared = rule(**strategies)(played)
            return precondition(when)(declared) if when is not None else declared

        strategies = {
            name: kind.strategy() if hasattr(kind, "strategy") else kind
            for name, kind in arguments.items()
        }
        one_node = {
            name: strategy for name, strategy in strategies.items()
            if not getattr(arguments[name], "optional", False)
        }
        if one_node != strategies:
            ON_SEVERAL_NODES[body.__name__] = step(strategies)
        return step(one_node)

    return declare


def sentence(rule_name: str, arguments: dict) -> str | None:
    """The rule's sentence for these arguments (``None`` for an unknown
    rule)."""
    spec = RULES.get(rule_name)
    return spec.says(**arguments) if spec else None

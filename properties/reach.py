"""Pairwise reach: which orders of two parties' hand-off operations a
search played.

The windows (:mod:`properties.windows`) are named by hand, so a race
between two of them can go unnamed and unplayed. This measure is
mechanical instead. Every bus operation of agentscope's inbox hand-off
(``deliver_to_inbox``, ``register_inbox_consumer``,
``has_pending_inbox_or_release``, ``abandon_inbox_consumer`` and the
wake-up dispatcher) is already a switch point in the trace; each one is
classified by its party and kind (:data:`KINDS`), and a story *reached*
the order ``a→b`` when, on one session, an operation of kind ``a`` was
directly followed by one of kind ``b`` of another party: no operation of
either's episode (a delivery, a run, a dispatcher's batch) between them,
whatever others did meanwhile, and the two consecutive or their episodes
interleaved (:func:`orders`). A story counts once per order.

Some orders cannot happen while the inbox lock holds
(:func:`allowed`): a producer's push never lands between a turn-tail
check's drain and its put-back. Those are never "unreached"; seeing one
means the lock was lost (its lease expired), and the verdict says so.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import combinations

from agentscope.app.message_bus import MessageBusKeys

from harness.kernel.trace import TraceEntry
from harness.world.surface import ABSENT, INBOX, REGISTRATION

from .windows import RUN_TASK

PRODUCER, CONSUMER, DISPATCHER = "producer", "consumer", "dispatcher"

#: Where an operation of a kind stands in its task's inbox-lock critical
#: section: ``first`` (the lock), ``inner``, ``last`` (the release, or a
#: producer's registry read, after which it only lets go), or ``free``
#: (outside any critical section).
FIRST, INNER, LAST, FREE = "first", "inner", "last", "free"


@dataclass(frozen=True)
class Kind:
    """One kind of hand-off operation: its party, its label, the bus call
    it is, and where it may stand in a critical section."""

    party: str
    name: str
    what: str
    places: frozenset[str]

    @property
    def label(self) -> str:
        """``p.push``: the party's initial and the kind."""
        return f"{self.party[0]}.{self.name}"


KINDS: tuple[Kind, ...] = (
    Kind(PRODUCER, "lock", "acquire_lock of the inbox lock (deliver_to_inbox)", frozenset({FIRST})),
    Kind(PRODUCER, "push", "queue_push of the payload onto the inbox, under the lock", frozenset({INNER})),
    Kind(PRODUCER, "read", "registry_get of the consumer registration, under the lock", frozenset({LAST})),
    Kind(PRODUCER, "wake", "queue_push of a wake trigger, after reading no consumer", frozenset({FREE})),
    Kind(CONSUMER, "lock", "acquire_lock of the inbox lock by a turn-tail check", frozenset({FIRST})),
    Kind(CONSUMER, "drain", "queue_drain of the inbox: a reasoning step's (no lock) or a turn-tail "
         "check's", frozenset({INNER, FREE})),
    Kind(CONSUMER, "put-back", "queue_push of a drained payload back, in a turn-tail check", frozenset({INNER})),
    Kind(CONSUMER, "reg-write", "registry_set of the registration (a run's start, no lock), registry_del "
         "(a check that found nothing; abandon_inbox_consumer's, after the lock)", frozenset({INNER, FREE})),
    Kind(CONSUMER, "release", "release_lock of the inbox lock by a turn-tail check", frozenset({LAST})),
    Kind(DISPATCHER, "pop", "queue_drain of the wake-up queue that took up a trigger of the session",
         frozenset({FREE})),
    Kind(DISPATCHER, "probe", "is_locked of the session lock, for a trigger it popped", frozenset({FREE})),
)

BY_LABEL: dict[str, Kind] = {k.label: k for k in KINDS}


def allowed(before: Kind, after: Kind) -> bool:
    """Whether ``before`` directly followed by ``after`` (another party's)
    can happen while the inbox lock excludes. Between two operations of
    one critical section the lock is held, so another party's operation
    directly after the first (before the task's next one) is outside its
    own critical section, unless the first was the last of its section and
    the second the first of its own (one hand-off of the lock)."""
    return any(
        a == FREE or b == FREE or (a == LAST and b == FIRST)
        for a in before.places for b in after.places
    )


def order(a: str, b: str) -> str:
    """An order's name: ``p.push→c.drain``."""
    return f"{a}→{b}"


#: Every unordered pair of kinds of two different parties, in :data:`KINDS`
#: order.
PAIRS: tuple[tuple[Kind, Kind], ...] = tuple(
    (a, b) for a, b in combinations(KINDS, 2) if a.party != b.party
)

#: The orders of :data:`PAIRS` the protocol allows, and those it forbids.
ALLOWED: tuple[str, ...] = tuple(
    order(x.label, y.label) for a, b in PAIRS for x, y in ((a, b), (b, a)) if allowed(x, y)
)
FORBIDDEN: tuple[str, ...] = tuple(
    order(x.label, y.label) for a, b in PAIRS for x, y in ((a, b), (b, a)) if not allowed(x, y)
)


@dataclass(frozen=True)
class HandOff:
    """One classified operation: where it is in the trace, who made it
    (task and party), on which session, of which kind."""

    position: int
    task: str
    session: str
    kind: Kind
    episode: int = 0
    """Where its episode began: a producer's delivery at its lock, a
    dispatcher's batch at its pop; a run's operations are one episode
    (0)."""

    @property
    def actor(self) -> tuple[str, str, int]:
        """The episode it belongs to: task, party, start."""
        return (self.task, self.kind.party, self.episode)


ABANDON = "abandon_inbox_consumer"


def _prefixes() -> dict[str, str]:
    """Key prefix -> the key's role, for the installed release's keys."""
    return {
        INBOX.inbox_lock_key(""): "inbox lock",
        INBOX.consumer_key(""): "registration",
        MessageBusKeys.session_lock(""): "session lock",
        MessageBusKeys.inbox(""): "inbox",  # last: the other inbox keys share it
    }


def _role(key: str) -> tuple[str, str] | None:
    """(role, session id) of a hand-off key, or None."""
    for prefix, role in _prefixes().items():
        if key.startswith(prefix):
            session = key[len(prefix):].split("#")[0]
            return (role, session) if session else None
    return None


def classify(entries: Iterable[TraceEntry], sessions: dict[str, str]) -> list[HandOff]:
    """The hand-off operations of a trace, in trace order. ``sessions``
    maps the aliases in run tasks' names (``chat-run:leader#2``) to
    session ids.

    A task's critical section of a session's inbox lock is a producer's
    when its first operation is a push, a turn-tail check's when it is a
    drain; the check is the consumer's when the task is a run of that
    session (or its ``abandon_inbox_consumer``), and no party's otherwise
    (a fix's sweeper). A pop is the dispatcher's queue_drain of the
    wake-up queue, of the sessions its task then probes (one probe per
    trigger popped)."""
    by = {k.label: k for k in KINDS}
    found: list[HandOff] = []
    open_cs: dict[tuple[str, str], list] = {}  # (task, session) -> [lock position, shape]
    wake_for: dict[str, tuple[str, int]] = {}  # task -> (session, delivery) its read found no consumer of
    batch: dict[str, list] = {}  # task -> [pop position, probes left, sessions seen]

    def consumer_of(task: str, session: str) -> bool:
        run = RUN_TASK.match(task)
        return (run is not None and sessions.get(run.group(2)) == session) or task.startswith(ABANDON)

    def add(entry: TraceEntry, session: str, label: str, episode: int = 0) -> None:
        if label != "p.read":
            wake_for.pop(entry.task, None)  # a wake-up follows its read, nothing else of its task between
        found.append(HandOff(entry.seq, entry.task, session, by[label], episode))

    for e in entries:
        if e.op == "queue_drain" and e.key == MessageBusKeys.wakeup_queue():
            taken = int(e.detail.split()[0]) if e.detail.split()[:1] and e.detail.split()[0].isdigit() else 0
            batch[e.task] = [e.seq, taken, set()]
            continue
        if e.op == "queue_push" and e.key == MessageBusKeys.wakeup_queue():
            waking = wake_for.pop(e.task, None)
            if waking is not None and not e.detail.startswith(("FAILED", "APPLIED")):
                found.append(HandOff(e.seq, e.task, waking[0], by["p.wake"], waking[1]))
            continue
        place = _role(e.key)
        if place is None:
            continue
        role, session = place
        if role == "session lock":
            pending = batch.get(e.task)
            if e.op == "is_locked" and pending and pending[1] > 0:
                pending[1] -= 1
                if session not in pending[2]:
                    pending[2].add(session)
                    found.append(HandOff(pending[0], e.task, session, by["d.pop"], pending[0]))
                add(e, session, "d.probe", pending[0])
            continue
        cs = open_cs.get((e.task, session))
        if role == "inbox lock":
            if e.op == "acquire_lock" and "acquired" in e.detail:
                open_cs[(e.task, session)] = [e.seq, None]
            elif e.op == "release_lock" and cs is not None:
                del open_cs[(e.task, session)]
                if cs[1] == CONSUMER:
                    add(e, session, "c.release")
            continue
        if cs is not None and cs[1] is None:  # the section's first operation says whose it is
            if role == "inbox" and e.op == "queue_push":
                cs[1] = PRODUCER
            elif role == "inbox" and e.op == "queue_drain":
                cs[1] = CONSUMER if consumer_of(e.task, session) else "other"
            else:
                cs[1] = "other"
            if cs[1] in (PRODUCER, CONSUMER):
                found.append(HandOff(cs[0], e.task, session, by[f"{cs[1][0]}.lock"],
                                     cs[0] if cs[1] == PRODUCER else 0))
        shape = cs[1] if cs is not None else None
        if shape == PRODUCER:
            if role == "inbox" and e.op == "queue_push":
                add(e, session, "p.push", cs[0])
            elif role == "registration" and e.op == "registry_get":
                add(e, session, "p.read", cs[0])
                if e.detail == "None":
                    wake_for[e.task] = (session, cs[0])
        elif shape == "other" or not consumer_of(e.task, session):
            continue
        elif role == "inbox" and e.op == "queue_drain":
            add(e, session, "c.drain")
        elif role == "inbox" and e.op == "queue_push" and shape == CONSUMER:
            add(e, session, "c.put-back")
        elif role == "registration" and e.op in ("registry_set", "registry_del"):
            add(e, session, "c.reg-write")
    return sorted(found, key=lambda h: h.position)


def orders(handoffs: Iterable[HandOff]) -> set[str]:
    """The orders ``a→b`` in ``handoffs``: on one session, an operation of
    one episode followed by one of another party's episode with no
    operation of either episode between them, the two either consecutive
    among the session's hand-off operations or interleaved (one episode
    began before the other ended: a delivery, a run, a dispatcher's batch).
    A producer's last operation and a pop twenty operations later with a
    run's in between are neither: nothing raced there."""
    handoffs = list(handoffs)
    first: dict[tuple, int] = {}
    final: dict[tuple, int] = {}
    for n, h in enumerate(handoffs):
        first.setdefault((h.session, h.actor), n)
        final[(h.session, h.actor)] = n
    seen: set[str] = set()
    last: dict[str, dict[tuple, tuple[int, Kind]]] = {}  # session -> episode -> its latest
    previous: dict[str, int] = {}  # session -> position of its latest hand-off operation
    for n, h in enumerate(handoffs):
        mine = last.setdefault(h.session, {})
        since = mine.get(h.actor, (-1, None))[0]
        for actor, (m, kind) in mine.items():
            if actor[1] == h.kind.party or actor[0] == h.task or m <= since:
                continue
            consecutive = previous.get(h.session) == m
            interleaved = first[(h.session, h.actor)] < m or final[(h.session, actor)] > n
            if consecutive or interleaved:
                seen.add(order(kind.label, h.kind.label))
        mine[h.actor] = (n, h.kind)
        previous[h.session] = n
    return seen


def story_orders(entries: Iterable[TraceEntry], sessions: dict[str, str]) -> set[str]:
    """The orders one finished story reached (nothing where the installed
    release has no consumer registration)."""
    if REGISTRATION in ABSENT:
        return set()
    return orders(classify(entries, sessions))


def not_applicable(absent: dict[str, str] = ABSENT) -> str | None:
    """Why the installed release has no such pairs, or None."""
    return absent.get(REGISTRATION)


def counts(stories: Counter) -> dict[str, int]:
    """Stories per allowed order (zero where none), then any forbidden
    order that was seen anyway."""
    result = {o: stories.get(o, 0) for o in ALLOWED}
    result.update({o: stories[o] for o in FORBIDDEN if stories.get(o)})
    return result


def unreached(reached: dict[str, int]) -> list[str]:
    """The allowed orders never reached, a pair never reached either way
    as one ``a⇄b``."""
    missing = [o for o in ALLOWED if not reached.get(o)]
    said: list[str] = []
    for o in missing:
        a, _, b = o.partition("→")
        back = order(b, a)
        if back in missing:
            if f"{b}⇄{a}" not in said:
                said.append(f"{a}⇄{b}")
        else:
            said.append(o)
    return said


def line(reached: dict[str, int]) -> str:
    """The verdict's line: the unreached pairs, and any order the lock
    forbids that was seen anyway."""
    missing = unreached(reached)
    played = sum(1 for o in ALLOWED if reached.get(o))
    if missing:
        text = f"unreached pairs ({played} of {len(ALLOWED)} orders reached): " + ", ".join(missing)
    else:
        text = f"pairs: all {len(ALLOWED)} orders the protocol allows reached"
    against = [o for o in FORBIDDEN if reached.get(o)]
    if against:
        text += "; seen though the inbox lock forbids them: " + ", ".join(against)
    return text


def table(rows: dict[str, dict[str, int]]) -> Iterator[str]:
    """Markdown rows, one per unordered pair: for each column of ``rows``
    (a name -> counts), the stories of each order."""
    names = list(rows)
    yield "| pair | " + " | ".join(names) + " |"
    yield "|---|" + "---|" * len(names)
    for a, b in PAIRS:
        there, back = order(a.label, b.label), order(b.label, a.label)
        cells = []
        for name in names:
            got = rows[name]
            cells.append(" / ".join(
                "–" if o in FORBIDDEN else str(got.get(o, 0)) for o in (there, back)
            ))
        yield f"| {a.label} · {b.label} | " + " | ".join(cells) + " |"

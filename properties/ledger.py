"""What the harness itself did to the world: the ground truth invariants
compare against (faults injected, payloads delivered, decisions, messages
and interrupts sent, jobs finished)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from harness.world.observation import SessionView


@dataclass(frozen=True)
class Interrupt:
    """An interrupt the user sent, and what its session was doing at that
    moment (the world is quiescent while the user presses stop, so the
    moment is the observation taken just before)."""

    alias: str
    mark: int
    """How many events the session had published: later ones came after."""
    reply_id: str | None = None
    """The reply in progress or parked (started, not ended), if any."""
    parked_on: tuple[str, ...] = ()
    """Calls the session awaited: asked about by the open reply (a run at
    its turn tail has not stored them yet) or stored as ASKING/SUBMITTED,
    and with no result published (a run that has just applied a decision
    or an interrupt has not stored that yet either)."""
    run_alive: bool = False
    overtaken: bool = False
    """Every call the session was parked on had been answered already: the
    answer's resume owns the reply, and the stop races it (it may find the
    reply done)."""

    @classmethod
    def seen(cls, view: SessionView) -> Interrupt:
        """An interrupt sent to the session ``view`` shows."""
        return cls(
            alias=view.alias,
            mark=len(view.events),
            reply_id=view.open_reply_id(),
            parked_on=cards_showing(view),
            run_alive=view.run_alive,
        )

    @property
    def has_target(self) -> bool:
        """Whether there was a reply to interrupt: the session was parked,
        or a live run had a reply in progress. Otherwise (idle, or a run
        before its reply started or after it ended) the interrupt has
        nothing to end."""
        if self.overtaken:
            return False
        return bool(self.parked_on) or (self.run_alive and self.reply_id is not None)


def cards_showing(view: SessionView) -> tuple[str, ...]:
    """The calls ``view``'s session awaits its user for: asked about by
    the open reply (a run at its turn tail has not stored them yet) or
    stored as ASKING/SUBMITTED, and with no result published (a run that
    has just applied a decision or an interrupt has not stored that yet
    either)."""
    done = view.call_ids_with_results()
    return tuple(dict.fromkeys(
        c
        for c in [*view.requested_call_ids(view.open_reply_id()), *view.awaiting_call_ids]
        if c not in done
    ))


@dataclass(frozen=True)
class Restart:
    """A node's graceful shutdown and restart, and what the sessions were
    doing as it began (the world is quiescent then)."""

    parked: dict[str, tuple[str, ...]]
    """Per session, the calls whose card showed, not yet answered."""
    cancelled: frozenset[str]
    """Sessions whose run the shutdown cancelled."""
    stops: dict[str, int]
    """Per session, how many stops the user had pressed by then."""
    marks: dict[str, int]
    """Per session, how many events it had published by then."""


@dataclass
class Ledger:
    """What the harness did: the ground truth invariants compare against."""

    #: Sessions an injected fault has touched (once it fired: an armed
    #: fault that never fires excuses nothing).
    faults: set[str] = field(default_factory=set)
    #: Per session, the payloads handed to its inbox, in the order the
    #: deliveries began; per payload, those whose delivery had not returned
    #: when its own began.
    delivered: dict[str, list[str]] = field(default_factory=dict)
    overlapping: dict[str, frozenset[str]] = field(default_factory=dict)
    decisions: dict[str, list[str]] = field(default_factory=dict)
    #: Messages the user sent while the session was parked, and whether
    #: the endpoint refused them.
    parked_messages: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    #: Sessions whose run's process crashed.
    crashed: set[str] = field(default_factory=set)
    #: Per session, each confirmation answer: (call id, the call's note,
    #: confirmed or denied).
    confirmations: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    interrupts: list[Interrupt] = field(default_factory=list)
    #: How many interrupts each answered call's session had had by then.
    interrupts_before: dict[str, int] = field(default_factory=dict)
    #: Per session, the background jobs the harness let finish (notes).
    jobs_finished: dict[str, list[str]] = field(default_factory=dict)
    #: Messages the user sent through the chat endpoint: (session, refused
    #: with 409, a run of the session was in flight when it was sent, the
    #: session was parked on a call, as stored, when it was sent, the
    #: reason the refusal gave).
    messages: list[tuple[str, bool, bool, bool, str]] = field(default_factory=list)
    #: Node restarts, in order.
    restarts: list[Restart] = field(default_factory=list)
    #: Sessions the user deleted: their ids, and each one's alias.
    deleted: dict[str, str] = field(default_factory=dict)
    #: Per delete, whether a run was alive and whether a card showed.
    deletions: list[tuple[bool, bool]] = field(default_factory=list)
    #: Sessions whose storage a rule made fail every call from then on.
    broken_storage: set[str] = field(default_factory=set)
    #: Settles that played more bus operations than a world at rest could,
    #: each said in one line (the kernel's :class:`Restless`).
    restless: list[str] = field(default_factory=list)

    def deliver(self, alias: str, marker: str, overlapping: frozenset[str] = frozenset()) -> None:
        """``marker`` was handed to ``alias``'s inbox while the deliveries
        of ``overlapping`` had not returned yet."""
        self.delivered.setdefault(alias, []).append(marker)
        self.overlapping[marker] = overlapping

    def out_of_order(self, alias: str, seen: list[str]) -> tuple[str, str] | None:
        """Two payloads ``seen`` in the wrong order, the later first: only
        a delivery that returned before the other began is ordered (two that
        overlap may reach the inbox either way, whoever takes its lock
        first)."""
        order = self.delivered.get(alias, [])
        for n, later in enumerate(seen):
            for earlier in seen[n + 1:]:
                if order.index(earlier) < order.index(later) and earlier not in self.overlapping.get(later, ()):
                    return earlier, later
        return None

    def decide(self, alias: str, tool_call_id: str) -> None:
        self.decisions.setdefault(alias, []).append(tool_call_id)
        self.interrupts_before[tool_call_id] = len(self.interrupts_of(alias))

    def confirm(self, alias: str, call_id: str, note: str, confirmed: bool) -> None:
        self.confirmations.setdefault(alias, []).append((call_id, note, confirmed))
        self.interrupts_before[call_id] = len(self.interrupts_of(alias))

    def interrupted_since_answer(self, alias: str, call_id: str) -> bool:
        """Whether the user pressed stop on ``alias`` after answering
        ``call_id`` (a stop may end the resumed reply before the call runs)."""
        return len(self.interrupts_of(alias)) > self.interrupts_before.get(call_id, 0)

    def message_while_parked(self, alias: str, marker: str, refused: bool) -> None:
        self.parked_messages.setdefault(alias, []).append((marker, refused))

    def message_sent(self, alias: str, refusal: str | None, busy: bool, parked: bool = False) -> None:
        """A message the user sent, and the endpoint's refusal (None: it
        was accepted)."""
        self.messages.append((alias, bool(refusal), busy, parked, refusal or ""))

    def job_finished(self, alias: str, note: str) -> None:
        self.jobs_finished.setdefault(alias, []).append(note)

    def interrupt(self, view: SessionView) -> Interrupt:
        """Record an interrupt sent to the session ``view`` shows, as it
        was at that moment."""
        sent = Interrupt.seen(view)
        # A call the user has already answered is the answer's to end: a
        # stop pressed after it races the resume, and may find it done.
        decided = set(self.decisions.get(view.alias, []))
        open_calls = tuple(c for c in sent.parked_on if c not in decided)
        sent = replace(sent, parked_on=open_calls, overtaken=bool(sent.parked_on) and not open_calls)
        self.interrupts.append(sent)
        return sent

    def answered_after(self, sent: Interrupt) -> bool:
        """Whether the user answered every call ``sent`` stopped, after
        pressing stop: the later answer and the stop race, and either may
        win (the card still shows until the stop is applied)."""
        before = next(n for n, i in enumerate(self.interrupts_of(sent.alias)) if i is sent)
        return bool(sent.parked_on) and all(
            self.interrupts_before.get(call, -1) > before for call in sent.parked_on
        )

    def interrupts_of(self, alias: str) -> list[Interrupt]:
        return [i for i in self.interrupts if i.alias == alias]

    def forget(self, view: SessionView) -> None:
        """The session ``view`` shows (just before) was deleted and a new
        one opened under its alias: what the harness did to the old one no
        longer describes the alias (the deleted one is left alone, I18)."""
        alias = view.alias
        self.deleted[view.session_id] = alias
        self.deletions.append((view.run_alive, bool(cards_showing(view))))
        for per_alias in (self.delivered, self.decisions, self.parked_messages, self.confirmations,
                          self.jobs_finished):
            per_alias.pop(alias, None)
        self.interrupts = [i for i in self.interrupts if i.alias != alias]
        self.messages = [m for m in self.messages if m[0] != alias]
        self.restarts = [replace(r, parked={a: c for a, c in r.parked.items() if a != alias})
                         for r in self.restarts]
        for per_session in (self.faults, self.crashed, self.broken_storage):
            per_session.discard(alias)

    def restart(self, views: dict[str, SessionView], cancelled: set[str]) -> Restart:
        """Record a node restart that began with the sessions as ``views``
        show them, and cancelled the runs of ``cancelled``."""
        parked = {}
        for alias, view in views.items():
            decided = set(self.decisions.get(alias, []))
            calls = tuple(c for c in cards_showing(view) if c not in decided)
            if calls:
                parked[alias] = calls
        done = Restart(
            parked=parked,
            cancelled=frozenset(cancelled),
            stops={alias: len(self.interrupts_of(alias)) for alias in views},
            marks={alias: len(view.events) for alias, view in views.items()},
        )
        self.restarts.append(done)
        return done


def ended_by_interrupt(view: SessionView, ledger: Ledger, since: int = 0) -> bool:
    """Whether a reply of ``view``'s session ended INTERRUPTED (at log
    position ``since`` or later) after the user had interrupted it."""
    return any(
        end.get("finished_reason") == "interrupted"
        for sent in ledger.interrupts_of(view.alias)
        for _, end in view.reply_ends(max(since, sent.mark))
    )

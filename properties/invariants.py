"""The invariants, each a small function of an :class:`Observation`.

An observation is what the harness saw of the world at a quiescent moment
(see :mod:`properties.observation`); a :class:`Ledger` is what the harness
itself did to it (faults injected, payloads delivered, decisions and
interrupts sent).
Each invariant raises :class:`InvariantViolated` with what was expected and
what happened. They are plain functions so that tests can feed them a
deliberately broken world and watch them fire.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fakes.permission_gate import job_output
from harness.cast import TEAM_OF
from harness.observation import REQUEST_EVENTS, Observation, SessionView

REMINDER_MARK = "<system-reminder>Team member"
#: The reminder agentscope sends a leader when a member's reply failed.
FAILURE_REMINDER_MARK = "hit an error while running"

#: Short names, as test ids and verdict rows show them.
INVARIANT_TITLES = {
    "I1": "no-error-reply-without-fault",
    "I2": "no-spurious-leader-reminder",
    "I3": "no-dangling-inbox-consumer",
    "I4": "parked-stays-parked",
    "I5": "payloads-delivered-once-in-order",
    "I6": "one-run-per-session",
    "I7": "confirm-resume-completes",
    "I8": "parked-message-not-lost",
    "I10": "failure-reported-once",
    "I11": "nothing-waits-forever",
    "I12": "calls-run-as-answered",
    "I13": "dispatcher-survives-bus-faults",
    "I9": "interrupt-not-lost",
    "I14": "background-results-delivered",
}


def code_order(code: str) -> tuple[int, str]:
    """Sort key for property codes: I2 before I10."""
    digits = "".join(ch for ch in code if ch.isdigit())
    return (int(digits) if digits else 0, code)


class InvariantViolated(AssertionError):
    """An invariant did not hold. ``code`` is its short name (I1, I2, …)."""

    def __init__(self, code: str, title: str, expected: str, actual: str):
        self.code = code
        self.title = title
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{code} {title}\n  expected: {expected}\n  actual:   {actual}",
        )


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

    @classmethod
    def seen(cls, view: SessionView) -> Interrupt:
        """An interrupt sent to the session ``view`` shows."""
        reply_id = view.open_reply_id()
        done = view.call_ids_with_results()
        parked_on = dict.fromkeys(
            c
            for c in [*view.requested_call_ids(reply_id), *view.awaiting_call_ids]
            if c not in done
        )
        return cls(
            alias=view.alias,
            mark=len(view.events),
            reply_id=reply_id,
            parked_on=tuple(parked_on),
            run_alive=view.run_alive,
        )

    @property
    def has_target(self) -> bool:
        """Whether there was a reply to interrupt: the session was parked,
        or a live run had a reply in progress. Otherwise (idle, or a run
        before its reply started or after it ended) the interrupt has
        nothing to end."""
        return bool(self.parked_on) or (self.run_alive and self.reply_id is not None)


@dataclass
class Ledger:
    """What the harness did: the ground truth invariants compare against."""

    faults: set[str] = field(default_factory=set)
    delivered: dict[str, list[str]] = field(default_factory=dict)
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
    #: Per session, the background jobs the harness let finish (notes).
    jobs_finished: dict[str, list[str]] = field(default_factory=dict)

    def deliver(self, alias: str, marker: str) -> None:
        self.delivered.setdefault(alias, []).append(marker)

    def decide(self, alias: str, tool_call_id: str) -> None:
        self.decisions.setdefault(alias, []).append(tool_call_id)

    def confirm(self, alias: str, call_id: str, note: str, confirmed: bool) -> None:
        self.confirmations.setdefault(alias, []).append((call_id, note, confirmed))

    def message_while_parked(self, alias: str, marker: str, refused: bool) -> None:
        self.parked_messages.setdefault(alias, []).append((marker, refused))

    def job_finished(self, alias: str, note: str) -> None:
        self.jobs_finished.setdefault(alias, []).append(note)

    def interrupt(self, view: SessionView) -> Interrupt:
        """Record an interrupt sent to the session ``view`` shows, as it
        was at that moment."""
        sent = Interrupt.seen(view)
        self.interrupts.append(sent)
        return sent

    def interrupts_of(self, alias: str) -> list[Interrupt]:
        return [i for i in self.interrupts if i.alias == alias]


def ended_by_interrupt(view: SessionView, ledger: Ledger, since: int = 0) -> bool:
    """Whether a reply of ``view``'s session ended INTERRUPTED (at log
    position ``since`` or later) after the user had interrupted it."""
    return any(
        end.get("finished_reason") == "interrupted"
        for sent in ledger.interrupts_of(view.alias)
        for _, end in view.reply_ends(max(since, sent.mark))
    )


def no_error_reply_without_fault(obs: Observation, ledger: Ledger) -> None:
    """I1: a reply ends with ERROR only when a rule injected a fault.

    Protects against the reported bug: a parked run re-entering its loop
    with no input and publishing a spurious ``ReplyEnd(ERROR)``."""
    for view in obs.sessions.values():
        errors = [e for e in view.events if _is_error_end(e)]
        if errors and view.alias not in ledger.faults:
            detail = errors[0].get("error") or {}
            raise InvariantViolated(
                "I1",
                "no ReplyEnd(ERROR) unless a fault was injected",
                f"no reply of {view.alias} ends with ERROR (no fault was "
                "injected)",
                f"{len(errors)} ReplyEnd(ERROR) published for {view.alias}: "
                f"{detail.get('type', '?')}: {detail.get('message', '')}",
            )


def no_spurious_leader_reminder(obs: Observation, ledger: Ledger) -> None:
    """I2: a leader hears "member failed" only when one of its members failed.

    A false reminder makes the leader answer a failure report for a worker
    that is merely waiting for its user."""
    for view in obs.sessions.values():
        reminders = [
            p for p in view.inbox_pushes if REMINDER_MARK in str(p.get("hint"))
        ]
        if not reminders:
            continue
        faulty_workers = {m for m in ledger.faults if TEAM_OF.get(m) == view.alias}
        if not faulty_workers:
            raise InvariantViolated(
                "I2",
                "no team-leader failure reminder unless a worker failed",
                f"no failure reminder in {view.alias}'s inbox (no worker "
                "failed)",
                f"{len(reminders)} reminder(s): "
                f"{_excerpt(str(reminders[0].get('hint')))}",
            )


def no_dangling_inbox_consumer(obs: Observation, ledger: Ledger) -> None:
    """I3: an inbox consumer registration never outlives its session's runs.

    A dangling registration makes every producer skip the wake-up, so the
    session's inbox is never drained (until the lease runs out)."""
    del ledger
    for view in obs.sessions.values():
        if view.consumer_registered and not view.run_alive:
            raise InvariantViolated(
                "I3",
                "no inbox consumer registration outlives the runs",
                f"{view.alias}'s inbox consumer registration is released "
                "when its last run ends",
                f"{view.alias} has no live run but its inbox is still "
                "registered as consumed",
            )


def parked_stays_parked(
    before: Observation | None,
    obs: Observation,
    ledger: Ledger,
) -> None:
    """I4: a parked session stays parked until its decision is applied.

    Compares two quiescent observations: a session seen parked (and idle)
    earlier may only be unparked now if the user answered one of the calls
    it was parked on (a confirmation, a denial or an external result), or
    interrupted it and a reply ended INTERRUPTED in between."""
    if before is None:
        return
    for alias, then in before.sessions.items():
        now = obs.sessions.get(alias)
        if now is None or then.run_alive or now.run_alive:
            continue
        if then.parked_status == "idle" or now.parked_status == then.parked_status:
            continue
        answered = set(ledger.decisions.get(alias, [])) & set(then.awaiting_call_ids)
        if not answered and not ended_by_interrupt(now, ledger, since=len(then.events)):
            raise InvariantViolated(
                "I4",
                "parked status is preserved",
                f"{alias} stays {then.parked_status} until the user answers "
                f"{then.awaiting_call_ids}",
                f"{alias} became {now.parked_status} with none of them answered "
                "(and no interrupt ended the reply)",
            )


def payloads_delivered_once_in_order(
    obs: Observation,
    ledger: Ledger,
) -> None:
    """I5: once settled and unparked, every delivered payload is in the
    agent's context exactly once, in delivery order.

    Only meaningful when the world has settled: before that a payload may
    legitimately still be on its way."""
    if not obs.settled:
        return
    for alias, markers in ledger.delivered.items():
        view = obs.sessions.get(alias)
        if view is None or view.parked_status != "idle":
            continue
        seen = [h for h in view.context_hints if h in set(markers)]
        if seen != markers:
            raise InvariantViolated(
                "I5",
                "no inbox payload is lost, duplicated or reordered",
                f"{alias}'s context holds {markers}",
                f"{alias}'s context holds {seen}; still queued: "
                f"{_markers_in(view.queued)}",
            )


def one_run_per_session(obs: Observation, ledger: Ledger) -> None:
    """I6: never two runs of one session inside its lock at once."""
    del ledger
    for view in obs.sessions.values():
        if len(view.lock_holders) > 1:
            raise InvariantViolated(
                "I6",
                "one run per session at a time",
                f"at most one task holds {view.alias}'s session lock",
                f"held by {sorted(view.lock_holders)}",
            )


def decided_calls_complete(obs: Observation, ledger: Ledger) -> None:
    """I7: once settled, every call the user decided on has left the
    awaiting state and its reply has ended normally (or INTERRUPTED, after
    the user interrupted it).

    Protects confirm/resume, the half of the HITL flow the user sees."""
    if not obs.settled:
        return
    for alias, call_ids in ledger.decisions.items():
        view = obs.sessions.get(alias)
        if view is None or alias in ledger.faults:
            continue
        stuck = sorted(set(call_ids) & set(view.awaiting_call_ids))
        unresolved = [c for c in call_ids if c not in view.resolved_call_ids]
        if stuck or unresolved:
            raise InvariantViolated(
                "I7",
                "confirm/resume always completes",
                f"{alias}'s decided calls {call_ids} complete with a result",
                f"still awaiting {stuck}; no result for {unresolved}",
            )
        last_end = view.last_reply_end()
        if last_end == "interrupted" and ended_by_interrupt(view, ledger):
            continue
        if view.parked_status == "idle" and last_end not in (
            None,
            "completed",
            "exceed_max_iters",
        ):
            raise InvariantViolated(
                "I7",
                "confirm/resume always completes",
                f"{alias}'s resumed reply ends normally",
                f"it ended {last_end}",
            )


def parked_messages_reach_the_agent(obs: Observation, ledger: Ledger) -> None:
    """I8: a message the user sends while the agent is parked is refused
    up front (409) or reaches the agent; it is never accepted and dropped.

    A parked agent cannot take a new message before its pending calls are
    answered. Refusing it tells the user; keeping it for after the resume
    loses nothing; accepting it and then failing the run leaves the user
    with an error about the agent's setup and a message the agent never
    saw. Checked once settled (before that the message may be on its way)."""
    if not obs.settled:
        return
    for alias, messages in ledger.parked_messages.items():
        view = obs.sessions.get(alias)
        if view is None:
            continue
        waiting = " ".join(_markers_in(view.queued))
        for marker, refused in messages:
            if refused or marker in view.context_user_texts or marker in waiting:
                continue
            errors = [e for e in view.events if _is_error_end(e)]
            detail = (errors[-1].get("error") or {}) if errors else {}
            raise InvariantViolated(
                "I8",
                "a message to a parked session is refused or reaches the agent",
                f"{alias}'s endpoint refuses {marker!r}, or {alias}'s agent "
                "gets it (now or after the resume)",
                f"accepted, but not in {alias}'s context nor queued; "
                f"{len(errors)} ReplyEnd(ERROR) published"
                + (f", the last: {detail.get('type', '?')}: {detail.get('message', '')}" if errors else ""),
            )


def failures_reported_once(obs: Observation, ledger: Ledger) -> None:
    """I10: once settled, every reply ends exactly once, and a leader hears
    of each failed reply of its worker exactly once.

    A failing model call is an expected fault: the user must see the reply
    end (with ERROR) once, not twice and not never, and the leader must be
    told once so it neither waits forever nor re-dispatches the task twice.
    A reply still parked on a tool call has not ended yet."""
    del ledger
    if not obs.settled:
        return
    for view in obs.sessions.values():
        starts = [e.get("reply_id") for e in view.events if e.get("type") == "REPLY_START"]
        ends = [e.get("reply_id") for e in view.events if e.get("type") == "REPLY_END"]
        asks = [e.get("reply_id") for e in view.events if e.get("type") in REQUEST_EVENTS]
        parked_reply = asks[-1] if asks and view.parked_status != "idle" else None
        for reply_id in dict.fromkeys(starts):
            count = ends.count(reply_id)
            if count == 1 or (count == 0 and reply_id == parked_reply):
                continue
            raise InvariantViolated(
                "I10",
                "every reply ends exactly once; each failure is reported once",
                f"reply {reply_id} of {view.alias} ends exactly once",
                f"it ended {count} times ({view.parked_status})",
            )
    for leader in obs.sessions.values():
        members = [m for m, led_by in TEAM_OF.items() if led_by == leader.alias]
        if not members:
            continue
        failed = sum(
            1
            for member in members
            if member in obs.sessions
            for e in obs.sessions[member].events
            if _is_error_end(e)
        )
        told = sum(
            1 for p in leader.inbox_pushes if FAILURE_REMINDER_MARK in str(p.get("hint"))
        )
        if told != failed:
            raise InvariantViolated(
                "I10",
                "every reply ends exactly once; each failure is reported once",
                f"the {leader.alias} is told of each of its members' {failed} "
                "failed replies exactly once",
                f"the {leader.alias} got {told} failure reminder(s)",
            )


def nothing_waits_forever(obs: Observation, ledger: Ledger) -> None:
    """I11: once settled past every lease, no session is still locked or
    registered as consumed without a run, and no payload waits in the inbox
    of a session that is not parked (nothing would ever consume it).

    Liveness after failures: a crashed run's lock and consumer registration
    must stop blocking once their leases expire, and what was delivered to
    the session meanwhile must then reach its agent. A parked session's
    inbox rightly waits for the resume."""
    if not obs.past_leases:
        return
    for view in obs.sessions.values():
        crashed = " (its run's process crashed)" if view.alias in ledger.crashed else ""
        if not view.run_alive and (view.lock_leased or view.consumer_registered):
            raise InvariantViolated(
                "I11",
                "nothing waits forever",
                f"with no run alive, {view.alias}'s session lock and inbox "
                "registration have expired",
                f"still {'locked' if view.lock_leased else ''}"
                f"{' and ' if view.lock_leased and view.consumer_registered else ''}"
                f"{'registered as consumed' if view.consumer_registered else ''}{crashed}",
            )
        if view.parked_status != "idle" or view.run_alive or not view.queued:
            continue
        raise InvariantViolated(
            "I11",
            "nothing waits forever",
            f"{view.alias}'s inbox is consumed once the world settles past "
            "every lease",
            f"{len(view.queued)} payload(s) still queued in {view.alias}'s "
            f"inbox with no run or wake-up pending{crashed}: "
            + "; ".join(_excerpt(m, 80) for m in _markers_in(view.queued)),
        )


def calls_run_as_answered(obs: Observation, ledger: Ledger) -> None:
    """I12: once settled, every call the user confirmed ran exactly once
    and every call the user denied never ran.

    With several calls waiting in one turn the user answers them one at a
    time: each answer must apply to its own call only, whatever arrives in
    between."""
    if not obs.settled:
        return
    for alias, answers in ledger.confirmations.items():
        view = obs.sessions.get(alias)
        if view is None:
            continue
        for call_id, note, confirmed in answers:
            runs = view.tool_runs.count(note)
            if runs == (1 if confirmed else 0):
                continue
            raise InvariantViolated(
                "I12",
                "each call runs as the user answered it",
                f"{alias}'s call {call_id} ({note!r}), "
                f"{'confirmed' if confirmed else 'denied'} by the user, runs "
                f"{'exactly once' if confirmed else 'never'}",
                f"it ran {runs} time(s); {alias} is {view.parked_status}",
            )


def dispatcher_survives(obs: Observation, ledger: Ledger) -> None:
    """I13: the wake-up dispatcher keeps running whatever one bus operation
    does.

    It is the only party that turns queued triggers into runs: once its
    loop ends, every later wake-up, resume and channel message of the
    process waits in the queue for good."""
    if not obs.dispatcher_alive:
        faults = ", ".join(sorted(ledger.faults)) or "none"
        raise InvariantViolated(
            "I13",
            "the wake-up dispatcher survives a failed bus operation",
            "agentscope's WakeupDispatcher loop is still running",
            f"its loop has ended (sessions with injected faults: {faults})",
        )


def interrupt_not_lost(obs: Observation, ledger: Ledger) -> None:
    """I9: once settled, every interrupt the user sent while its session
    was parked or had a reply in progress has ended that reply: the session
    no longer awaits the calls it was parked on, and a ReplyEnd(INTERRUPTED)
    of that reply was published after the interrupt. An interrupt with no
    reply to end (an idle session) may do nothing.

    Protects the user's stop button: an interrupt agentscope accepted (HTTP
    202) must not be silently dropped."""
    if not obs.settled:
        return
    for sent in ledger.interrupts:
        view = obs.sessions.get(sent.alias)
        if view is None or not sent.has_target:
            continue
        stuck = [c for c in sent.parked_on if c in view.awaiting_call_ids]
        ends = view.reply_ends(sent.mark)
        honoured = any(
            end.get("finished_reason") == "interrupted"
            and (sent.reply_id is None or end.get("reply_id") == sent.reply_id)
            for _, end in ends
        )
        if stuck or not honoured:
            moment = (
                f"parked on {list(sent.parked_on)}"
                if sent.parked_on
                else f"with reply {sent.reply_id} in progress"
            )
            after = [
                f"{e.get('reply_id')}:{e.get('finished_reason')}" for _, e in ends
            ]
            raise InvariantViolated(
                "I9",
                "no interrupt is lost",
                f"the interrupt sent to {sent.alias} ({moment}) ends that "
                "reply: ReplyEnd(INTERRUPTED), no call left awaiting",
                f"{sent.alias} is {view.parked_status}"
                + (f", still awaiting {stuck}" if stuck else "")
                + f"; reply ends published after the interrupt: {after or 'none'}",
            )


def background_results_delivered(obs: Observation, ledger: Ledger) -> None:
    """I14: once settled and unparked, the output of every background job
    that finished is in the agent's context exactly once: as its call's
    result, or as the completion notice agentscope queues in the inbox.

    A job the agent started and nobody stopped is work the user paid for;
    a result that reaches nobody leaves the agent believing it is still
    running (or that it was interrupted) while its effects happened."""
    if not obs.settled:
        return
    for alias, notes in ledger.jobs_finished.items():
        view = obs.sessions.get(alias)
        if view is None or view.parked_status != "idle":
            continue
        for note in notes:
            output = job_output(note)
            seen = sum(
                text.count(output)
                for text in (*view.context_tool_outputs, *view.context_hints)
            )
            if seen != 1:
                raise InvariantViolated(
                    "I14",
                    "every finished background job's result reaches the agent once",
                    f"{output!r} is in {alias}'s context once",
                    f"it is there {seen} times ({len(view.queued)} payload(s) "
                    f"still queued for {alias})",
                )


STEP_INVARIANTS = (
    no_error_reply_without_fault,
    no_spurious_leader_reminder,
    no_dangling_inbox_consumer,
    one_run_per_session,
    payloads_delivered_once_in_order,
    decided_calls_complete,
    parked_messages_reach_the_agent,
    failures_reported_once,
    nothing_waits_forever,
    calls_run_as_answered,
    dispatcher_survives,
    interrupt_not_lost,
    background_results_delivered,
)


def invariant_statement(code: str) -> str:
    """The invariant ``code`` in plain words: its function's docstring."""
    for check in (*STEP_INVARIANTS, parked_stays_parked):
        doc = " ".join((check.__doc__ or "").split())
        if doc.startswith(f"{code}:"):
            return doc[len(code) + 1 :].strip()
    return INVARIANT_TITLES.get(code, code)


def _is_error_end(event: dict) -> bool:
    return (
        event.get("type") == "REPLY_END"
        and event.get("finished_reason") == "error"
    )


def _markers_in(payloads: list[dict]) -> list[str]:
    return [str(p.get("hint")) for p in payloads]


def _excerpt(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "Interrupt",
    "InvariantViolated",
    "Ledger",
    "SessionView",
    "STEP_INVARIANTS",
    "invariant_statement",
    "parked_stays_parked",
]

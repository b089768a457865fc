"""Risky windows: the moments a property's stories must reach.

A property that holds says little unless its search reached the moments
where it could break. Each :class:`Window` names one such moment, taken from
the inbox hand-off protocol's own structure rather than from the bugs found
so far: the awaits between a check and the action it guards, the sections a
producer and a run both enter, how many payloads an inbox check finds, and
each phase of a run. A window is recognised in a finished story's bus trace
(and the ledger of what the harness did), so counting it changes nothing
agentscope does. Each property's catalog record lists its windows; the
verdict says how often each was reached (``holds (stop-while-card-shows
×37)``) or which never was (``holds, unreached: ...``).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from agentscope.app.message_bus import MessageBusKeys

from harness.kernel.trace import TraceEntry
from harness.world.surface import ABSENT, HAND_OFF_CALLS, INBOX, REGISTRATION

from .ledger import Ledger

PARKING = ("REQUIRE_USER_CONFIRM", "REQUIRE_EXTERNAL_EXECUTION")
ANSWERS = ("USER_CONFIRM_RESULT", "EXTERNAL_EXECUTION_RESULT")
RUN_TASK = re.compile(r"^(chat|wake|resume)-run:([^#@]+)")


def as_their_runs(entries: Iterable[TraceEntry], creators: dict[str, str]) -> tuple[TraceEntry, ...]:
    """``entries`` with the operations of a task a run created to make one
    of agentscope's hand-off calls (``creators``: each task's creator)
    as the run's own: the run awaits it, and the windows and the hand-off
    orders are the run's."""
    def acting(task: str) -> str:
        creator = creators.get(task, "")
        if RUN_TASK.match(creator) and re.split("[#@]", task)[0] in HAND_OFF_CALLS:
            return creator
        return task

    return tuple(replace(e, task=acting(e.task)) for e in entries)


@dataclass(frozen=True)
class Story:
    """What one finished story left behind: its trace, with raw ids."""

    entries: tuple[TraceEntry, ...]
    ledger: Ledger
    sessions: dict[str, str]  # alias -> session id

    @classmethod
    def played(cls, world, ledger: Ledger) -> "Story":
        """The story ``world`` played, with its runs' own hand-off tasks as
        the runs (:func:`as_their_runs`)."""
        interleaver = world.interleaver
        entries = as_their_runs(interleaver.trace.entries, interleaver.creators())
        return cls(entries, ledger, dict(world.sessions))

    def run_session(self, entry: TraceEntry) -> str | None:
        """The session id of a run task (tasks are named by alias:
        ``chat-run:leader#2``)."""
        found = RUN_TASK.match(entry.task)
        return self.sessions.get(found.group(2)) if found else None

    def interrupts(self) -> Iterable[tuple[int, str]]:
        """(position, session id) of each stop the cancel dispatcher got."""
        channel = MessageBusKeys.session_interrupt_channel()
        for n, e in enumerate(self.entries):
            if e.op == "receive" and e.key == channel:
                yield n, e.detail.partition("session_id=")[2].split(",")[0]


@dataclass(frozen=True)
class Window:
    """One risky moment, and how to count it in a story."""

    slug: str
    what: str
    count: Callable[[Story], int]
    needs: str | None = None
    """The feature (:data:`harness.world.surface.ABSENT`) without which
    the window does not exist."""


def _held_spans(story: Story, start: Callable[[TraceEntry], bool], end: Callable[[TraceEntry, TraceEntry], bool]):
    """(session, first, last) positions: from an entry ``start`` accepts to
    the first later entry of the same run that ``end`` accepts."""
    for n, opened in enumerate(story.entries):
        session = story.run_session(opened)
        if session is None or not start(opened):
            continue
        last = next(
            (m for m in range(n + 1, len(story.entries)) if end(opened, story.entries[m])),
            len(story.entries),
        )
        yield session, n, last


def _parked_tails(story: Story):
    """A run's span from publishing a card (or an external job) to its
    turn tail: its next check of its inbox, or where the release has no
    such check, its release of the session."""
    operation, key_of = INBOX.turn_tail
    return _held_spans(
        story,
        lambda e: e.op == "log_append" and e.detail in PARKING,
        lambda opened, e: e.task == opened.task and e.op == operation
        and e.key.startswith(key_of("")),
    )


def _run_holds_lock(story: Story):
    """A run's span from taking its session lock to releasing it."""
    return _held_spans(
        story,
        lambda e: e.op == "acquire_lock" and e.key.startswith(MessageBusKeys.session_lock("")),
        lambda opened, e: e.task == opened.task and e.op == "release_lock" and e.key == opened.key,
    )


def _card_to_release(story: Story):
    """A run's span from publishing a card to releasing its session lock."""
    return _held_spans(
        story,
        lambda e: e.op == "log_append" and e.detail in PARKING,
        lambda opened, e: e.task == opened.task and e.op == "release_lock"
        and e.key.startswith(MessageBusKeys.session_lock("")),
    )


def payload_in_parked_tail(story: Story) -> int:
    return sum(
        1
        for session, first, last in _parked_tails(story)
        for e in story.entries[first:last]
        if e.op == "queue_push" and e.key == MessageBusKeys.inbox(session)
    )


def _parked_saving_state(story: Story):
    """A parked run's span from the end of its turn tail (its check
    released the inbox lock) to its clean-up's save trimming the session's
    event log: the run waits for the save meanwhile (the trim is the
    save's, made by a task of its own). The run published a card (or an
    external job) before."""
    if INBOX.inbox_lock_key is None:
        return
    events = MessageBusKeys.session_events("")
    for n, e in enumerate(story.entries):
        if e.op != "log_trim" or not e.key.startswith(events):
            continue
        session = e.key[len(events):]
        last = next((m for m in range(n - 1, -1, -1) if story.run_session(story.entries[m]) == session), None)
        if last is None:
            continue
        tail = story.entries[last]
        if tail.op == "release_lock" and tail.key == INBOX.inbox_lock_key(session) and any(
            x.task == tail.task and x.op == "log_append" and x.detail in PARKING for x in story.entries[:last]
        ):
            yield session, last, n


def _stops_within(story: Story, spans) -> int:
    """Stops the cancel dispatcher got for a session inside one of its
    ``(session, first, last)`` spans."""
    spans = list(spans)
    return sum(1 for n, s in story.interrupts() if any(s == sess and a < n < b for sess, a, b in spans))


def stop_while_card_shows(story: Story) -> int:
    return _stops_within(story, _card_to_release(story))


def stop_while_running(story: Story) -> int:
    return _stops_within(story, _run_holds_lock(story))


def stop_in_parked_clean_up(story: Story) -> int:
    return _stops_within(story, _parked_saving_state(story))


def two_stops_one_run(story: Story) -> int:
    stops = list(story.interrupts())
    return sum(
        1
        for session, a, b in _run_holds_lock(story)
        if sum(1 for n, s in stops if s == session and a < n < b) >= 2
    )


def _inbox_checks(story: Story) -> list[int]:
    """Payloads found by each turn-tail inbox check (the drains right after
    a run, or its hand-back, took the inbox lock)."""
    found: list[int] = []
    if INBOX.inbox_lock_key is None:
        return found
    for n, e in enumerate(story.entries[:-1]):
        nxt = story.entries[n + 1]
        if (
            e.op == "acquire_lock" and e.key.startswith(INBOX.inbox_lock_key(""))
            and nxt.task == e.task and nxt.op == "queue_drain"
            and (story.run_session(e) is not None or e.task.startswith("abandon_inbox_consumer"))
        ):
            found.append(int(nxt.detail.split()[0]))
    return found


def inbox_check_finds(low: int, high: int | None) -> Callable[[Story], int]:
    def count(story: Story) -> int:
        return sum(1 for n in _inbox_checks(story) if n >= low and (high is None or n <= high))
    return count


def producer_check_then_act(story: Story) -> int:
    """A producer saw no consumer (so it will wake the session itself), and
    a run took the session lock or registered before that wake-up landed."""
    hits = 0
    entries = story.entries
    registry = INBOX.consumer_key("") if INBOX.consumer_key else None
    for n, e in enumerate(entries if registry else ()):
        if not (e.op == "registry_get" and e.key.startswith(registry) and e.detail == "None"):
            continue
        session = e.key[len(registry):].split("#")[0]
        act = next((m for m in range(n + 1, len(entries)) if entries[m].task == e.task
                    and entries[m].op == "queue_push" and entries[m].key == MessageBusKeys.wakeup_queue()), None)
        if act is not None and any(
            story.run_session(x) == session and x.op in ("acquire_lock", "registry_set")
            for x in entries[n + 1:act]
        ):
            hits += 1
    return hits


def _appended(story: Story, details: tuple[str, ...]) -> int:
    return sum(1 for e in story.entries if e.op == "log_append" and story.run_session(e) and e.detail in details)


def resumed_turn(story: Story) -> int:
    return _appended(story, ANSWERS)


def failed_reply(story: Story) -> int:
    return sum(1 for e in story.entries if e.op == "log_append" and e.detail == "REPLY_END finished_reason=error")


def dispatcher_finds_session_busy(story: Story) -> int:
    return sum(
        1 for e in story.entries
        if e.task.startswith("wakeup-dispatcher") and e.op == "is_locked" and e.detail == "True"
    )


def dispatch_of_failing_session(story: Story) -> int:
    """The wake-up dispatcher took up a trigger of a session whose storage
    fails every call (its check of the session's lock)."""
    broken = {MessageBusKeys.session_lock(story.sessions[a]) for a in story.ledger.broken_storage
              if a in story.sessions}
    return sum(
        1 for e in story.entries
        if e.op == "is_locked" and e.key in broken and e.task.startswith(("wakeup-dispatcher", "_dispatch_batch"))
    )


def fault_fired(story: Story) -> int:
    return sum(1 for e in story.entries if "injected fault" in e.detail)


def fault_in_dispatch_batch(story: Story) -> int:
    """An injected fault fired in the wake-up dispatcher while it worked
    through a batch of two or more triggers."""
    hits, batch = 0, 0
    for e in story.entries:
        if not e.task.startswith("wakeup-dispatcher"):
            continue
        if e.op == "queue_drain" and e.key == MessageBusKeys.wakeup_queue():
            batch = int(e.detail.split()[0])
        elif "injected fault" in e.detail and batch >= 2:
            hits += 1
    return hits


def run_dies_registered(story: Story) -> int:
    """A crashed session's run registered as its inbox consumer and never
    handed the registration back nor released its lock."""
    crashed = {story.sessions[a] for a in story.ledger.crashed if a in story.sessions}
    dead = 0
    if INBOX.consumer_key is None:
        return dead
    for task in {e.task for e in story.entries if story.run_session(e) in crashed}:
        mine = [e for e in story.entries if e.task == task]
        registered = any(e.op == "registry_set" and e.key.startswith(INBOX.consumer_key("")) for e in mine)
        let_go = any(e.op == "release_lock" and e.key.startswith(MessageBusKeys.session_lock("")) for e in mine)
        dead += registered and not let_go
    return dead


def stop_during_slow_tool(story: Story) -> int:
    return _stops_within(story, _held_spans(
        story,
        lambda e: e.op == "log_append" and e.detail == "TOOL_RESULT_START",
        lambda opened, e: e.task == opened.task and e.op == "log_append" and e.detail == "TOOL_RESULT_END",
    ))


WINDOWS: tuple[Window, ...] = (
    Window("payload-in-parked-tail", "a payload lands between a parked turn's card and its inbox check",
           payload_in_parked_tail),
    Window("stop-while-card-shows", "stop pressed after the card is published, the run still holding the lock",
           stop_while_card_shows),
    Window("stop-while-running", "stop pressed while a run holds the session lock", stop_while_running),
    Window("two-stops-one-run", "two stops reach one run", two_stops_one_run),
    Window("stop-in-parked-clean-up", "stop pressed while a parked run waits for its clean-up to save its state",
           stop_in_parked_clean_up, REGISTRATION),
    Window("inbox-check-finds-0", "a turn-tail inbox check finds nothing", inbox_check_finds(0, 0),
           REGISTRATION),
    Window("inbox-check-finds-1", "a turn-tail inbox check finds one payload", inbox_check_finds(1, 1),
           REGISTRATION),
    Window("inbox-check-finds-2+", "a turn-tail inbox check finds two or more payloads",
           inbox_check_finds(2, None), REGISTRATION),
    Window("producer-check-then-act", "a run starts between a producer's consumer check and its wake-up",
           producer_check_then_act, REGISTRATION),
    Window("resumed-turn", "a turn resumed by a confirmation or an external result", resumed_turn),
    Window("failed-reply", "a reply ends in ERROR", failed_reply),
    Window("dispatcher-finds-session-busy", "the dispatcher finds a session's lock held", dispatcher_finds_session_busy),
    Window("fault-fired", "an injected bus fault fires", fault_fired),
    Window("fault-in-dispatch-batch", "a fault fires while the dispatcher works through 2+ triggers",
           fault_in_dispatch_batch),
    Window("run-dies-registered", "a run dies holding its lock and its consumer registration", run_dies_registered,
           REGISTRATION),
    Window("stop-during-slow-tool", "stop pressed while a tool's result is pending", stop_during_slow_tool),
    Window("message-while-parked", "the user writes to a parked session",
           lambda story: sum(len(v) for v in story.ledger.parked_messages.values())),
    Window("message-while-busy", "the user writes while a run is in flight",
           lambda story: sum(1 for message in story.ledger.messages if message[2])),
    Window("job-finishes", "a background job finishes", lambda story: sum(map(len, story.ledger.jobs_finished.values()))),
    Window("dispatch-of-failing-session", "the dispatcher takes up a trigger of a session whose storage keeps failing",
           dispatch_of_failing_session),
    Window("delete-while-running", "a session is deleted while a run of it holds its lock",
           lambda story: sum(1 for running, _ in story.ledger.deletions if running)),
    Window("delete-while-parked", "a session is deleted while its card shows",
           lambda story: sum(1 for _, parked in story.ledger.deletions if parked)),
    Window("restart-while-parked", "a node restarts while a session waits on its card, no run alive",
           lambda story: sum(len(set(r.parked) - r.cancelled) for r in story.ledger.restarts)),
    Window("restart-after-card", "a node restarts while a run that has shown its card finishes its turn",
           lambda story: sum(len(set(r.parked) & r.cancelled) for r in story.ledger.restarts)),
    Window("restart-mid-run", "a node restarts while a run with no card showing holds its session",
           lambda story: sum(len(r.cancelled - set(r.parked)) for r in story.ledger.restarts)),
)

BY_SLUG: dict[str, Window] = {w.slug: w for w in WINDOWS}


def not_applicable(slugs: Iterable[str], absent: dict[str, str] = ABSENT) -> dict[str, str]:
    """Those of ``slugs`` the installed release has no such moment for,
    and why (a feature of ``absent``, the release's missing ones)."""
    return {s: absent[BY_SLUG[s].needs] for s in slugs if BY_SLUG[s].needs in absent}


def count(story: Story, slugs: Iterable[str]) -> Counter:
    """How often ``story`` reached each of ``slugs`` that the installed
    release has."""
    missing = not_applicable(slugs)
    return Counter({slug: BY_SLUG[slug].count(story) for slug in slugs if slug not in missing})


def describe(verdict: str, reached: dict[str, int], slugs: Iterable[str]) -> str:
    """``holds (w ×3, v ×1)``, or ``holds, unreached: u`` when a window of
    ``slugs`` was never reached."""
    slugs = list(slugs)
    if not slugs:
        return verdict
    unreached = [s for s in slugs if not reached.get(s)]
    if unreached and verdict == "holds":
        return f"{verdict}, unreached: {', '.join(unreached)}"
    return f"{verdict} ({', '.join(f'{s} ×{reached.get(s, 0)}' for s in slugs)})"

"""What a program of bus operations is, for the differential bus test
(``test_bus_differential.py``): its vocabulary, how Hypothesis draws one,
and what each step refers to once earlier steps have run."""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

#: One key per mode, so that a short program's steps meet on it (keys of
#: a mode are independent in every bus); two channels, as a subscriber
#: hears only its own.
LOCKS = ("lock",)
QUEUES = ("queue",)
LOGS = ("log",)
NAMESPACES = ("registry",)
FIELDS = ("f", "g")
VALUES = ("v1", "v2")
CHANNELS = ("chan:a", "chan:b")
TTLS = (None, 5, 10, 30)
LEASES = (5, 10, 30)
#: Leases of held locks: their heartbeat (every ttl / 2) then beats on
#: whole seconds, like every other instant of a program, so that no
#: virtual deadline is nearer than a second to a step.
HELD_LEASES = (10, 30)
PASSES = (1, 4, 5, 6, 10, 25)
COUNTS = (1, 2, 100)
MAX_LENS = (None, 1, 2)
#: A drawn index picks among what exists when the step runs (holders,
#: subscribers, entries of a log), modulo how many there are.
PICK = st.integers(0, 3)
#: Longest program drawn.
STEPS_AT_MOST = 20


@dataclass(frozen=True)
class Step:
    """One bus operation of a program, as drawn."""

    op: str
    key: str = ""
    args: tuple[tuple[str, object], ...] = ()

    def __getattr__(self, name: str):
        """A drawn argument by name (``step.ttl``)."""
        for arg, value in self.args:
            if arg == name:
                return value
        raise AttributeError(name)

    def __repr__(self) -> str:
        shown = ([repr(self.key)] if self.key else []) + [f"{a}={v!r}" for a, v in self.args]
        return f"{self.op}({', '.join(shown)})"


def step(op: str, key: str = "", **args) -> Step:
    """``step("queue_push", "queue", ttl=5)``: a step written by hand."""
    return Step(op, key, tuple(sorted(args.items())))


def _steps(op: str, keys: tuple[str, ...] = ("",), **args) -> st.SearchStrategy[Step]:
    return st.builds(lambda key, **a: step(op, key, **a), st.sampled_from(keys), **args)


def _of(values) -> st.SearchStrategy:
    return st.sampled_from(values)


#: The operations of each bus mode. Modes share nothing but time (their
#: keys never meet), so a program draws one mode, some of its operations
#: (swarm testing: a program without drains fills its queue) and time
#: passing, and its steps meet on that mode's key.
MODES = (
    (
        _steps("try_lock", LOCKS, ttl=_of(LEASES)),
        _steps("unlock", LOCKS),
        _steps("is_locked", LOCKS),
        _steps("acquire_lock", LOCKS, ttl=_of(HELD_LEASES)),
        _steps("release_lock", holder=PICK),
    ),
    (
        _steps("queue_push", QUEUES, ttl=_of(TTLS)),
        _steps("queue_drain", QUEUES, max_count=_of(COUNTS)),
        _steps("queue_delete", QUEUES),
    ),
    (
        _steps("log_append", LOGS, ttl=_of(TTLS), max_len=_of(MAX_LENS)),
        _steps("log_read", LOGS, since=st.none() | PICK, max_count=_of(COUNTS)),
        _steps("log_trim", LOGS, before=st.none() | PICK),
    ),
    (
        _steps("registry_set", NAMESPACES, field=_of(FIELDS), value=_of(VALUES), ttl=_of(TTLS)),
        _steps(
            "registry_set_if", NAMESPACES,
            field=_of(FIELDS), value=_of(VALUES), expected=_of(VALUES), ttl=_of(TTLS),
        ),
        *(_steps(op, NAMESPACES, field=_of(FIELDS))
          for op in ("registry_get", "registry_exists", "registry_pop", "registry_del")),
        _steps("registry_getall", NAMESPACES),
        _steps("registry_drop", NAMESPACES),
    ),
    (
        _steps("subscribe", CHANNELS),
        _steps("publish", CHANNELS),
        _steps("receive", subscriber=PICK),
    ),
)
TIME_PASSES = _steps("pass_time", seconds=_of(PASSES))


@st.composite
def programs(draw) -> list[Step]:
    """A program: steps of one mode's chosen operations, and time."""
    mode = draw(st.sampled_from(MODES))
    chosen = draw(st.lists(st.booleans(), min_size=len(mode), max_size=len(mode)))
    steps = st.one_of(*[ops for ops, on in zip(mode, chosen) if on] or mode)
    one_step = st.sampled_from([steps, steps, TIME_PASSES]).flatmap(lambda drawn: drawn)
    return draw(st.lists(one_step, max_size=STEPS_AT_MOST))


# ── what the steps refer to, the same for every bus ───────────────────


@dataclass
class LogLife:
    """A log's entries since the key was last created, and whether a
    ``max_len`` capped it since. Cursors come from the current life only:
    Redis' ids restart when a stream key is deleted, so an older cursor
    can equal a newer id (in the same millisecond)."""

    names: list[str] = field(default_factory=list)
    deadline: float | None = None
    capped: bool = False


#: What a step makes is named by a letter and the step's index: ``e3`` the
#: entry step 3 pushed, appended or published, ``h5`` the holder step 5
#: sent into a lock, ``s1`` step 1's subscriber.
MAKES = {
    "queue_push": "e", "log_append": "e", "publish": "e",
    "acquire_lock": "h", "subscribe": "s",
}


@dataclass(frozen=True)
class Call:
    """A drawn step with what it refers to resolved: what every bus is
    asked. ``name`` is what the step makes, or the holder or subscriber it
    picks; ``cursor`` a log entry's name (``since``, ``before``; a
    ``log_trim`` that finds none trims the whole log, which then holds
    nothing of its current life anyway)."""

    index: int
    step: Step
    key: str
    name: str | None = None
    cursor: str | None = None

    def __str__(self) -> str:
        picked = self.cursor or (None if self.step.op in MAKES else self.name)
        return f"{self.step!r}" + (f" -> {picked}" if picked else "")


class Plan:
    """Virtual time, each log's life, the open lock holders and the
    subscribers: what a drawn index picks from, whatever the buses say."""

    def __init__(self) -> None:
        self.now = 0.0
        self.logs: dict[str, LogLife] = {key: LogLife() for key in LOGS}
        self.holders: dict[str, str] = {}  # holder -> lock key
        self.subscribers: dict[str, str] = {}  # subscriber -> channel

    def call(self, index: int, drawn: Step) -> Call:
        """``drawn``, its picks resolved against what exists now."""
        if drawn.op in MAKES:
            return Call(index, drawn, drawn.key, f"{MAKES[drawn.op]}{index}")
        match drawn.op:
            case "release_lock":
                name = _pick(list(self.holders), drawn.holder)
                return Call(index, drawn, self.holders.get(name, ""), name)
            case "receive":
                name = _pick(list(self.subscribers), drawn.subscriber)
                return Call(index, drawn, self.subscribers.get(name, ""), name)
            case "log_read" | "log_trim":
                pick = drawn.since if drawn.op == "log_read" else drawn.before
                cursor = _pick(self.logs[drawn.key].names, pick)
                return Call(index, drawn, drawn.key, cursor=cursor)
        return Call(index, drawn, drawn.key)

    def capped(self, call: Call) -> bool:
        """Whether a ``max_len`` capped the call's log in its current life."""
        return call.key in self.logs and self.logs[call.key].capped

    def after(self, call: Call) -> None:
        """What the step did to the plan."""
        s = call.step
        match s.op:
            case "acquire_lock":
                self.holders[call.name] = call.key
            case "release_lock":
                self.holders.pop(call.name, None)
            case "subscribe":
                self.subscribers[call.name] = call.key
            case "log_append":
                life = self.logs[call.key]
                life.names.append(call.name)
                life.capped |= s.max_len is not None
                if s.ttl is not None:
                    life.deadline = self.now + s.ttl
            case "log_trim" if call.cursor is None:
                self.logs[call.key] = LogLife()
            case "pass_time":
                self.now += s.seconds
                for key, life in self.logs.items():
                    if life.deadline is not None and life.deadline <= self.now:
                        self.logs[key] = LogLife()


def _pick(names: list[str], index: int | None) -> str | None:
    return names[index % len(names)] if names and index is not None else None

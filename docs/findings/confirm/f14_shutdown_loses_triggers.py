"""F14 (candidate): a graceful shutdown loses the triggers the wake-up
dispatcher has drained but not yet turned into runs, and the runs it
spawned that have not yet applied their input.

The story, from the harness's fake bus: ``solo`` parks on a confirmation
(``GatedAction``, ``ASKING``, ``REQUIRE_USER_CONFIRM`` published). The user
confirms through the chat endpoint (HTTP 200): the endpoint queues a
``resume`` trigger and publishes the wake-up signal. The node shuts down
(the app's lifespan exit, what every rolling upgrade does) while the
wake-up dispatcher is dispatching that trigger. A replacement node starts
on the same storage and bus; its dispatcher drains the trigger queue on
start. The queue is empty, no run is spawned, and the call stays ``ASKING``
although the user answered. Likewise a ``wake`` trigger for an inbox
payload: the payload waits in the inbox with no trigger and no consumer.

Why it can happen (agentscope 2.0.8 and 2.0.11 have the same
``_wakeup_dispatcher.py`` and ``_chat_run_registry.py``):
``_drain_and_dispatch`` takes up to 64 entries off the durable queue
(``queue_drain``) and then dispatches them one by one, holding them only in
the local list. ``_dispatch_one`` awaits ``is_locked`` (on Redis an
``EXISTS`` round trip) and the orphan guard ``storage.get_session`` (a
database read) before it spawns the run. The lifespan's stack exits the
``CancelDispatcher``, then the ``WakeupDispatcher`` (``__aexit__`` cancels
its loop task), then ``SchedulerManager``, then ``ChatRunRegistry``
(``__aexit__`` cancels every run in flight), then the managers, bus and
storage. A cancel in either await drops the trigger and the rest of the
batch: nothing re-queues them. A run the dispatcher spawned keeps its input
only in memory until it has applied it under the session lock (``_run_impl``
takes ``acquire_lock(session_lock)`` first, then reads the agent and the
session), and the registry's cancel ends it there with nothing re-queued.

What the script shows. Each scenario runs on a fresh scratch folder and
bus. App 1 (``_app.py``: agentscope's own app layer, real sqlite storage)
parks ``solo`` and takes the user's confirmation through the chat
endpoint. Its shutdown is ``App.close()``: the taps, then the exit stack in
the lifespan's order (``CancelDispatcher``, ``WakeupDispatcher``,
``ChatRunRegistry``, ``BackgroundTaskManager``, workspace manager,
storage). App 2 then opens on the same sqlite file and the same bus (on the
in-memory bus the same instance, as a shared bus would be; on Redis a new
``RedisMessageBus`` on the same server), with the same user; its scripts
are loaded before its dispatchers start, and its dispatcher drains on
start. After 1.5 s and a settle the script reports the stored call state,
the runs spawned and whether ``GatedAction`` ran on either node, and the
triggers still queued.

On agentscope's ``InMemoryMessageBus``:

A0. (control, not counted) the shutdown lands in the dispatcher's
    ``queue_drain`` of the trigger queue, before it took the entries: the
    trigger stays queued and app 2's drain on start runs the call. This
    shows the restart path works.
A.  (counted) the cancel lands in ``_dispatch_one``'s orphan guard,
    ``await self._storage.get_session(...)``, after the drain took the
    ``resume`` trigger and ``is_locked`` found the session free. On the
    in-memory bus this is the dispatcher's first await that yields for the
    trigger (``queue_drain`` and ``is_locked`` return without yielding), so
    it is where the natural race lands too (C).
A2. (counted) the cancel lands in ``_dispatch_one``'s
    ``await self._bus.is_locked(session_lock)`` (on Redis an ``EXISTS``
    round trip).
B.  (counted) the dispatcher spawned the ``resume`` run; the registry's
    cancel lands in the run's ``acquire_lock(session_lock)``, before it took
    the lock (on Redis a ``SET NX PX`` round trip).
B2. (counted) the run took the session lock; the registry's cancel lands in
    its first storage read (``resolve_agent``'s ``storage.get_agent``),
    before it applied the confirmation.
E.  (counted) a team member delivers a payload to idle ``solo``
    (``deliver_to_inbox``: no consumer registered, so a ``wake`` trigger);
    the cancel lands in the dispatcher's orphan-guard ``get_session`` for it.
S.  (counted) the user presses stop on the parked card; the session lock is
    free, so the interrupt route queues a ``resume`` trigger carrying a
    ``UserInterruptEvent``; the dispatcher spawned its run, and the
    registry's cancel lands in the run's ``acquire_lock(session_lock)``: the
    stop is lost and the card still shows after the restart.
C.  (information, no hook) the natural race: confirm, and the moment the
    endpoint answers, shut down; 10 tries, each on fresh apps.

On a real redis-server with ``RedisMessageBus`` (skipped when
``redis-server`` is not installed):

D1. (counted) the cancel lands once the drain's ``EVAL`` has been answered,
    before ``_dispatch_one`` (the entries are gone from the server; a
    cancel while the reply is read is the same).
D2. (counted) the cancel lands in ``_dispatch_one``'s ``is_locked``
    (``EXISTS``).
DC. (information, no hook) C on Redis, 5 tries.

How the windows are hit: ``ShutdownTrap``. A subclass of the bus (and a
wrapper around two of the storage object's read methods, on its instance)
calls the trap at one point: the dispatcher's ``queue_drain``,
``is_locked`` or ``get_session``, or the ``resume`` run's ``acquire_lock``
or ``get_agent``, each recognised by the task awaiting it (the dispatcher's
loop task, or the run's task in the registry). The trap starts the
shutdown (``App.close()``, as a task of its own) and holds the call until
the shutdown is over, or 5 s; it records whether a cancel landed in the
hold. On Redis and on Postgres each of these calls is a network round trip,
and a shutdown that starts while one is pending cancels the task in it;
the hold only makes the round trip last as long as the shutdown's first
steps, it does not change what code runs or in what order it awaits.

Result (2.0.8 and 2.0.11: exit 1 on each; the two releases have the same
dispatcher and registry). In A, A2, B, B2, E, D1 and D2 the cancel lands
in the held call, and after the restart the answered call is stored
``asking``, no run is spawned on node 2, ``GatedAction`` never ran on
either node and no trigger is queued; in E the payload waits in the inbox
with no trigger and no registration. In the control A0 the trigger stays
queued and node 2 runs the call (``finished``). C: 10 of 10 confirmations
lost on each release, every time with the dispatcher's last call the
orphan guard's ``get_session`` (the in-memory bus's ``queue_drain`` and
``is_locked`` do not yield, so the drain always happens before the
shutdown reaches the dispatcher, and the database read is where the cancel
finds it). DC: 4 and 5 of 5 lost on 2.0.8, 2 and 4 of 5 on 2.0.11 (two runs each);
each lost one was cancelled in the dispatcher's ``get_session`` or, once
spawned, in the run's ``acquire_lock`` (``SET NX PX``); the others ran on
node 1 before the registry's exit. The observer in C and DC holds nothing;
it only notes the calls the dispatcher and the run entered.

A note on the in-memory bus: a real restart of a process on
``InMemoryMessageBus`` loses the whole queue anyway. A to E reuse the
instance to stand for a shared bus; D shows the same on Redis, where the
queue outlives the process and the loss is only the drained batch and the
spawned-but-not-started run.

Exit codes: 1 if in a counted scenario whose window was hit the answered
call (or the payload) is stranded: not run, not queued, no run spawned; 0 if
the window was hit and nothing was stranded; 2 if no counted window was
hit; 3 if the script could not set the story up (its cause is printed).

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f14_shutdown_loses_triggers.py
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import App, VERSION, hint, in_memory_peek, quiet_agentscope, run_script, say, verdict  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ConfirmResult, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

BOOK = "f14"
TRIES = 10
REDIS_TRIES = 5


class SetupFailed(RuntimeError):
    """The story could not be set up (exit 3)."""


# ── the trap ────────────────────────────────────────────────────────────


class ShutdownTrap:
    """Springs once, at ``point`` (``"queue_drain:before"``,
    ``"queue_drain:after"``, ``"is_locked"``, ``"get_session"``,
    ``"acquire_lock"``, ``"get_agent"``) when ``whose`` is the awaiting
    task (``"dispatcher"`` or ``"run"``): starts the shutdown and holds the
    call until it is over (or 5 s)."""

    def __init__(self, point: str, whose: str) -> None:
        self.point = point
        self.whose = whose
        self.app: App | None = None
        self.session: str | None = None
        self.armed = False
        self.sprung = False
        self.cancel_landed = False
        self.shutdown: asyncio.Task | None = None
        self.where = ""
        self.seen: list[str] = []

    def _observe(self, point: str) -> None:
        """No hold: note the call the dispatcher or the run is in, so
        that the natural race can say where the shutdown found them."""
        task = asyncio.current_task()
        if self.app is None or task is None or (self.shutdown is not None and self.shutdown.done()):
            return
        if task is self.app.dispatcher._task:
            self.seen.append(f"dispatcher:{point}")
        elif task is self.app.registry.get(self.session) and task.get_name().startswith("resume-run"):
            self.seen.append(f"run:{point}")

    def _is_ours(self) -> bool:
        task = asyncio.current_task()
        if self.app is None or task is None:
            return False
        if self.whose == "dispatcher":
            return task is self.app.dispatcher._task
        return task is self.app.registry.get(self.session) and not task.get_name().startswith("chat-run")

    async def at(self, point: str, detail: str) -> None:
        if self.armed and self.whose == "observe":
            self._observe(point)
            return
        if not self.armed or self.sprung or point != self.point or not self._is_ours():
            return
        self.sprung = True
        self.where = f"{asyncio.current_task().get_name()} in {point} ({detail})"
        released = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.call_later(5.0, released.set)
        self.shutdown = asyncio.create_task(self.app.close(), name="lifespan-exit")
        self.shutdown.add_done_callback(lambda _t: released.set())
        try:
            # No asyncio.wait_for: on Python 3.11 it can swallow a cancel.
            await released.wait()
        except asyncio.CancelledError:
            self.cancel_landed = True
            raise


class TrapMixin:
    """The bus calls the trap can spring in."""

    trap: ShutdownTrap | None = None

    async def _at(self, point: str, detail: str) -> None:
        if self.trap is not None:
            await self.trap.at(point, detail)

    async def queue_drain(self, key: str, max_count: int = 100):
        if key == MessageBusKeys.wakeup_queue():
            await self._at("queue_drain:before", key)
        drained = await super().queue_drain(key, max_count)
        if key == MessageBusKeys.wakeup_queue() and drained:
            await self._at("queue_drain:after", f"{len(drained)} entries drained")
        return drained

    async def is_locked(self, key: str) -> bool:
        await self._at("is_locked", key)
        return await super().is_locked(key)

    @contextlib.asynccontextmanager
    async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
        if key.startswith(MessageBusKeys.session_lock("")):
            await self._at("acquire_lock", key)
        async with super().acquire_lock(key, ttl_secs=ttl_secs):
            yield


class TrapBus(TrapMixin, InMemoryMessageBus):
    """agentscope's ``InMemoryMessageBus``, with the trap's points."""


def trap_storage(app: App, trap: ShutdownTrap) -> None:
    """The storage reads the trap can spring in: ``get_session`` and
    ``get_agent`` of app's storage object, wrapped on the instance."""
    storage = app.storage
    for name in ("get_session", "get_agent"):
        real = getattr(storage, name)

        async def wrapped(*args: Any, _real=real, _name=name, **kwargs: Any):
            await trap.at(_name, "storage")
            return await _real(*args, **kwargs)

        setattr(storage, name, wrapped)


# ── one story: node 1 parks and takes the answer, shuts down; node 2 ────


@dataclass
class Node:
    app: App
    spawned: list[str] = field(default_factory=list)


async def open_node(bus, basedir: Path, *, user_id: str | None = None, scripts=None) -> Node:
    """An app on ``bus`` and ``basedir`` (the same user when ``user_id``),
    its scripts loaded before its dispatchers start (app 2 drains on
    start)."""
    app = App(bus, basedir, BOOK)
    await app.open(start_dispatchers=False, user_id=user_id)
    node = Node(app)
    spawn = app.registry.spawn

    def spawn_and_note(coro, *, session_id, name=None):  # observation only
        node.spawned.append(name or session_id)
        return spawn(coro, session_id=session_id, name=name)

    app.registry.spawn = spawn_and_note
    if scripts:
        scripts(app)
    await app.start_dispatchers()
    return node


def solo_scripts(app: App) -> None:
    app.script("solo").add(CallTool("GatedAction", {"note": "deploy"}), Text("deployed"))
    app.script("solo").when_empty = (Text("noted"),)


def after_restart_scripts(app: App) -> None:
    app.script("solo").when_empty = (Text("deployed"),)


@dataclass
class Outcome:
    name: str
    window_hit: bool
    where: str
    answer: str
    node1_spawned: list[str]
    node2_spawned: list[str]
    ran1: int
    ran2: int
    calls: list[str]
    triggers: list[str]
    inbox: int
    payload_stored: bool
    kind: str = "resume"

    @property
    def gated_ran(self) -> int:
        return self.ran1 + self.ran2

    @property
    def stranded(self) -> bool:
        if self.kind == "wake":
            return (self.inbox > 0 and not self.payload_stored and not self.triggers
                    and not [s for s in self.node2_spawned])
        return (self.gated_ran == 0 and any(c.endswith(":asking") for c in self.calls)
                and not self.triggers and not self.node2_spawned)

    def problems(self) -> list[str]:
        if not self.stranded:
            return []
        if self.kind == "wake":
            return [f"the payload waits in the inbox ({self.inbox}) with no trigger, no run and no consumer"]
        if self.kind == "stop":
            return ["the stopped card is stored ASKING after the restart, with no run and no trigger: "
                    "the stop is lost"]
        return ["the answered call is stored ASKING, with no run on either node after the spawn was lost, "
                "and no trigger queued"]

    def report(self) -> None:
        say(f"   shutdown cancel landed in the held call: {self.window_hit} ({self.where or 'trap not sprung'})")
        say(f"   {self.answer}")
        say(f"   runs spawned on node 1 after the answer: {self.node1_spawned or 'none'}; "
            f"on node 2: {self.node2_spawned or 'none'}")
        if self.kind == "wake":
            say(f"   after the restart: payload in the stored context: {self.payload_stored}; "
                f"inbox: {self.inbox} waiting; triggers queued: {self.triggers or 'none'}")
        else:
            say(f"   after the restart: stored call state: {self.calls or 'no tool call stored'}; "
                f"GatedAction ran on node 1: {self.ran1}, on node 2: {self.ran2}; triggers queued: {self.triggers or 'none'}")
        say(f"   stranded: {self.stranded}")


async def stored_calls(app: App, agent: str, session: str) -> list[str]:
    calls = []
    for msg in await app.context(agent, session):
        for block in msg.get_content_blocks():
            if getattr(block, "type", None) == "tool_call":
                state = getattr(block, "state", None)
                calls.append(f"{block.name}:{getattr(state, 'value', state)}")
    return calls


async def queued(bus, admin, key: str) -> list[dict]:
    """Entries waiting at queue ``key``: the in-memory bus's list, or the
    Redis stream read with the server's own client."""
    if admin is None:
        return in_memory_peek(bus, key)
    return [json.loads(fields["payload"]) for _id, fields in await admin.xrange(key)]


async def park(node: Node, agent: str, session: str) -> dict:
    """The user's message; the model calls ``GatedAction``; the card."""
    app = node.app
    ui = await app.tap(session)
    status = await app.post_chat(agent, session, "please deploy")
    card = await ui.wait_for("REQUIRE_USER_CONFIRM")
    await app.settle()
    calls = await stored_calls(app, agent, session)
    if status != 200 or calls != ["GatedAction:asking"]:
        raise SetupFailed(f"solo did not park: chat {status}, stored calls {calls}, events {ui.types()}")
    return card


def confirmation(card: dict) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(
        reply_id=card["reply_id"],
        confirm_results=[
            ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call))
            for call in card["tool_calls"]
        ],
    )


async def story(name: str, make_bus, trap: ShutdownTrap, *, kind: str = "resume",
                admin=None, restart_bus=None) -> Outcome:
    """One try. A trap that only observes: shut down the moment the
    endpoint answers (the natural race)."""
    basedir = Path(tempfile.mkdtemp(prefix="confirm-f14-"))
    bus1 = await make_bus()
    try:
        node1 = await open_node(bus1, basedir, scripts=solo_scripts)
        app1 = node1.app
    except BaseException:
        shutil.rmtree(basedir, ignore_errors=True)
        raise
    try:
        agent = await app1.add_agent("solo")
        session = await app1.add_session(agent, "solo")
        user_id = app1.user_id
        payload = "teammate: staging is ready"
        if kind in ("resume", "stop"):
            card = await park(node1, agent, session)
        before = len(node1.spawned)
        trap.app, trap.session = app1, session
        bus1.trap = trap
        trap_storage(app1, trap)
        trap.armed = True
        if kind == "resume":
            answer = f"confirmation: HTTP {await app1.post_chat_event(agent, session, confirmation(card))}"
        elif kind == "stop":
            answer = f"stop on the parked card: HTTP {await app1.press_stop(agent, session)}"
        else:
            await app1.deliver(agent, session, hint(payload, "team member"))
            answer = "payload delivered to idle solo (deliver_to_inbox)"
        if trap.whose == "observe":
            trap.shutdown = asyncio.create_task(app1.close(), name="lifespan-exit")
            await trap.shutdown
        else:
            deadline = asyncio.get_running_loop().time() + 5.0
            while trap.shutdown is None and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            if trap.shutdown is None:
                await app1.close()
            else:
                await trap.shutdown
        node1_spawned = node1.spawned[before:]
        node1_ran = len([e for e in app1.desk.runs("GatedAction") if e.session_id == session])
        bus2 = bus1 if restart_bus is None else await restart_bus(bus1)
        bus1.trap = None
        try:
            node2 = await open_node(bus2, basedir, user_id=user_id, scripts=after_restart_scripts)
            app2 = node2.app
            try:
                await asyncio.sleep(1.5)
                await app2.settle()
                node2_ran = len([e for e in app2.desk.runs("GatedAction") if e.session_id == session])
                inbox = await queued(bus2, admin, MessageBusKeys.inbox(session))
                return Outcome(
                    name=name,
                    window_hit=trap.cancel_landed,
                    where=trap.where or "no hold; calls before the shutdown ended: " + " > ".join(trap.seen),
                    answer=answer,
                    node1_spawned=node1_spawned,
                    node2_spawned=list(node2.spawned),
                    ran1=node1_ran,
                    ran2=node2_ran,
                    calls=await stored_calls(app2, agent, session),
                    triggers=[f"{t.get('kind')}:{t.get('session_id') == session}"
                              for t in await queued(bus2, admin, MessageBusKeys.wakeup_queue())],
                    inbox=len(inbox),
                    payload_stored=payload in await app2.context_texts(agent, session),
                    kind=kind,
                )
            finally:
                await app2.close()
        finally:
            if restart_bus is not None:
                await bus2.__aexit__(None, None, None)
    finally:
        await app1.close()  # a no-op once it has shut down
        shutil.rmtree(basedir, ignore_errors=True)


# ── the scenarios ───────────────────────────────────────────────────────


async def in_memory_bus() -> TrapBus:
    return TrapBus()


HOOKED = [
    ("A0", "control: the shutdown lands in the dispatcher's queue_drain, before it took the entry",
     "queue_drain:before", "dispatcher", "resume", False),
    ("A", "the cancel lands in _dispatch_one's orphan guard, storage.get_session",
     "get_session", "dispatcher", "resume", True),
    ("A2", "the cancel lands in _dispatch_one's bus.is_locked(session_lock)",
     "is_locked", "dispatcher", "resume", True),
    ("B", "the resume run was spawned; the registry's cancel lands in its acquire_lock(session_lock)",
     "acquire_lock", "run", "resume", True),
    ("B2", "the resume run holds the session lock; the cancel lands in its first storage read (get_agent)",
     "get_agent", "run", "resume", True),
    ("E", "a wake trigger for an inbox payload; the cancel lands in _dispatch_one's get_session",
     "get_session", "dispatcher", "wake", True),
    ("S", "a stop on the parked card (lock free: a resume carrying the interrupt); its run was spawned and "
     "the registry's cancel lands in its acquire_lock(session_lock)", "acquire_lock", "run", "stop", True),
]


def tally(outcomes: list[Outcome]) -> str:
    lost = sum(o.stranded for o in outcomes)
    ran1 = sum(1 for o in outcomes if not o.stranded and o.ran1)
    ran2 = sum(1 for o in outcomes if not o.stranded and o.ran2)
    other = len(outcomes) - lost - ran1 - ran2
    return (f"{lost} of {len(outcomes)} confirmations lost (stored ASKING, no run, no trigger); "
            f"{ran1} ran on node 1 before the shutdown; {ran2} ran on node 2 after the restart; "
            f"{other} otherwise")


async def main() -> int:
    quiet_agentscope()
    say(f"agentscope {VERSION}")
    counted: list[tuple[str, Outcome]] = []
    try:
        for name, text, point, whose, kind, counts in HOOKED:
            say(f"{name}. {text}")
            outcome = await story(name, in_memory_bus, ShutdownTrap(point, whose), kind=kind)
            outcome.report()
            if counts:
                counted.append((name, outcome))
            elif outcome.stranded or not outcome.gated_ran:
                raise SetupFailed(f"control {name}: the restart did not run the queued confirmation")

        say(f"C. (information, no hook) confirm, then shut down the moment the endpoint answers; {TRIES} tries")
        natural = [await story(f"C{i}", in_memory_bus, ShutdownTrap("", "observe")) for i in range(TRIES)]
        for o in natural:
            say(f"   {o.name}: node 1 spawned {o.node1_spawned or 'none'}, node 2 spawned "
                f"{o.node2_spawned or 'none'}, GatedAction ran {o.ran1}+{o.ran2}, stored {o.calls}, "
                f"triggers {o.triggers or 'none'}; {o.where}")
        say(f"   C: {tally(natural)}")

        await on_redis(counted)
    except SetupFailed as failed:
        say(f"setup failed (exit 3): {failed}")
        return 3

    return verdict(
        counted,
        missed="the shutdown's cancel never landed in a held call",
        fine="the shutdown met the held call, and the restart still ran the answered call",
    )


async def on_redis(counted: list) -> None:
    """D: the same on a real redis-server (skipped without one)."""
    try:
        from _redis import RedisServerUnavailable, redis_server
        from agentscope.app.message_bus import RedisMessageBus
    except ImportError as missing:
        say(f"D. skipped: {missing}")
        return

    class TrapRedisBus(TrapMixin, RedisMessageBus):
        """agentscope's ``RedisMessageBus``, with the trap's points."""

    try:
        async with redis_server("f14") as server:
            async def redis_bus() -> TrapRedisBus:
                await server.admin.flushall()
                return await TrapRedisBus("127.0.0.1", server.port).__aenter__()

            async def replacement(old) -> TrapRedisBus:
                # Node 1's lifespan exits its bus last; node 2 connects anew.
                await old.__aexit__(None, None, None)
                return await TrapRedisBus("127.0.0.1", server.port).__aenter__()

            say(f"D. on redis-server 127.0.0.1:{server.port} with RedisMessageBus")
            for name, text, point in (
                ("D1", "the cancel lands once the drain's EVAL has been answered, before _dispatch_one",
                 "queue_drain:after"),
                ("D2", "the cancel lands in _dispatch_one's is_locked (EXISTS)", "is_locked"),
            ):
                say(f"{name}. {text}")
                outcome = await story(name, redis_bus, ShutdownTrap(point, "dispatcher"),
                                      admin=server.admin, restart_bus=replacement)
                outcome.report()
                counted.append((name, outcome))
            say(f"DC. (information, no hook) C on Redis; {REDIS_TRIES} tries")
            natural = [await story(f"DC{i}", redis_bus, ShutdownTrap("", "observe"), admin=server.admin,
                                      restart_bus=replacement)
                       for i in range(REDIS_TRIES)]
            for o in natural:
                say(f"   {o.name}: node 1 spawned {o.node1_spawned or 'none'}, node 2 spawned "
                    f"{o.node2_spawned or 'none'}, GatedAction ran {o.ran1}+{o.ran2}, stored {o.calls}, "
                    f"triggers {o.triggers or 'none'}; {o.where}")
            say(f"   DC: {tally(natural)}")
    except RedisServerUnavailable as missing:
        say(f"D. skipped: {missing}")


if __name__ == "__main__":
    run_script(main)

"""Where each stop's cancel lands, in the natural races of F8, F8b and F11.

The confirming scripts of F8 (``f8_double_stop_in_turn_tail.py``), F8b
(``f8b_double_stop_on_parked_card.py``) and F11
(``f11_double_stop_during_slow_tool.py``) force one path with a bus hook
and count the natural race only as a total. This script adds no hook that
changes timing: it runs each story's natural race N times, on
agentscope's own ``InMemoryMessageBus`` and on ``RedisMessageBus`` against
a redis-server of its own, and records, for every ``Task.cancel()`` that
reaches a task running agentscope code, the line where the
``CancelledError`` is thrown into it.

How a landing site is read, with no tracer: the event loop's task factory
makes every task a :class:`TracedTask`, whose ``cancel()`` notes the
await chain the task is suspended in (``cr_await``, ``ag_await``, an
``async for``'s ``asend`` and a future's iterator are followed) before
asyncio's own ``cancel()`` runs. A suspended task gets its
``CancelledError`` at that await. A task that cancels itself while running
(``ChatService`` re-arms a cancel that landed in a publish with
``current.cancel()``) is noted once it has suspended, at the await where
the re-armed cancel is thrown. When a cancel reaches a task that awaits
another task unshielded, asyncio passes it on (``cancel()`` of the awaited
task), so both show. The only other instrument counts the bus calls the
outcome needs (the consumer ``registry_del`` and ``log_trim``); it delays
nothing.

Stories (each try in a fresh app on the same bus, so a sqlite connection
a cancel left in a transaction cannot spill into the next try):

- ``f8``: a channel payload wakes idle ``solo``; its run drains it and
  the reply ends; stop, stop back to back the moment the UI receives
  ``REPLY_END``. Outcome: ``payload lost`` (in neither the stored context
  nor the inbox), ``registration left``, or ``clean``.
- ``f8b``: ``solo`` parks on ``GatedAction``; stop, stop back to back the
  moment the UI receives ``REQUIRE_USER_CONFIRM``. Outcome: ``card lost``
  (no ``REPLY_END`` and the session stored idle, no parked call),
  ``stops lost, still parked`` (F3), ``ended <reason>``, and
  ``registration left``.
- ``f11``: ``leader`` calls ``BackgroundJob``; stop, stop back to back the
  moment the tool starts. Outcome: the reply's ``REPLY_END`` count
  (``no REPLY_END``, ``ended once``, ``ended twice``) and which events
  reached the stream after the stops.

It prints, per story and bus, each try's path and outcome, then a table:
path (the landing sites in order, each as ``task: function:line  source``)
-> how many tries, and their outcomes.

Exit codes: 0 when every try ran (the figures are information, not a
verdict); 3 when a try crashed (its cause is printed); 2 when the
redis-server could not be started and Redis was asked for.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/trace_cancels.py [--tries N]
        [--story f8,f8b,f11] [--bus memory,redis] [--with-fix]
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import inspect
import linecache
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, event_type, hint, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from f11_double_stop_during_slow_tool import SignalList  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

# ── the landing sites ────────────────────────────────────────────────


def _agentscope_frame(filename: str) -> bool:
    return "/agentscope/" in filename.replace("\\", "/")


def _short(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker in ("/agentscope/", "/site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def _awaited(obj: object) -> object | None:
    """What ``obj`` (a coroutine, generator, async generator, ``asend``,
    future iterator) is suspended on, or None."""
    for attr in ("cr_await", "gi_yieldfrom", "ag_await"):
        if hasattr(obj, attr):
            return getattr(obj, attr)
    name = type(obj).__name__
    if name in ("async_generator_asend", "async_generator_athrow", "FutureIter"):
        # Neither exposes what it wraps; the garbage collector's referents do.
        for ref in gc.get_referents(obj):
            if hasattr(ref, "ag_frame") or isinstance(ref, asyncio.Future):
                return ref
    return None


def await_chain(task: asyncio.Task) -> tuple[list[tuple[str, int, str, object]], str]:
    """The frames ``task`` is suspended in, outermost first, and what the
    innermost one awaits when that is a future or a task."""
    frames: list[tuple[str, int, str, object]] = []
    obj: object | None = task.get_coro()
    tail = ""
    for _ in range(200):
        if obj is None:
            break
        if isinstance(obj, asyncio.Future):
            tail = (f"awaits task {obj.get_coro().__qualname__}"
                    if isinstance(obj, asyncio.Task) else "awaits a future")
            break
        frame = next((getattr(obj, a) for a in ("cr_frame", "gi_frame", "ag_frame")
                      if getattr(obj, a, None) is not None), None)
        if frame is not None:
            frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname, frame))
        obj = _awaited(obj)
    return frames, tail


@dataclass
class Landing:
    """One cancel: who sent it, the task it reached, where it is thrown in."""

    cause: str
    serial: int
    task: str
    site: str
    inner: str

    def text(self, letter: str, inner: bool = True) -> str:
        """``letter`` names the task within its try (A, B...), so that the
        same path in two tries reads the same; ``inner`` adds the library
        frames the task waits in."""
        where = f"{self.site}" + (f" [{self.inner}]" if self.inner and inner else "")
        return f"{self.cause} -> task {letter} {self.task}: {where}"


def landing(task: asyncio.Task, cause: str) -> Landing | None:
    """Where ``task``'s cancel lands: the innermost agentscope frame of its
    await chain, with the source line, and below it the innermost frames of
    the libraries it waits in (redis, aiosqlite, asyncio). None if no
    agentscope frame is in the chain."""
    frames, tail = await_chain(task)
    ours = [f for f in frames if _agentscope_frame(f[0])]
    if not ours:
        return None
    filename, line, name, frame = ours[-1]
    source = linecache.getline(filename, line).strip()
    payload = frame.f_locals.get("payload") if name.endswith((".publish", ".log_append")) else None
    if isinstance(payload, dict):
        source += f"  (event {payload.get('type', '?')})"
    below = frames[frames.index(ours[-1]) + 1:]
    inner = " > ".join(f"{_short(f[0])}:{f[2].split('.')[-1]}:{f[1]}" for f in below[-3:]) or tail
    inner += _wait_for_state(below)
    outer = next((f[2] for f in frames if _agentscope_frame(f[0])), name)
    # A bus call names its caller (the turn tail's check, the clean-up's
    # hand-back...): the agentscope frame above it, when that one is not
    # ChatService itself.
    caller = ""
    if len(ours) > 1 and "/app/_service/" not in ours[-1][0].replace("\\", "/"):
        caller = ours[-2][2].split(".")[-1] + " > "
    return Landing(
        cause=cause,
        serial=getattr(task, "serial", 0),
        task=outer.split(".<locals>.")[-1],
        site=f"{caller}{name.split('.')[-1]}:{line}  {source}",
        inner=inner,
    )


def _wait_for_state(frames: list) -> str:
    """On Python 3.11 ``asyncio.wait_for`` runs what it waits for in a task
    of its own. Say whether that task had run when ``cancel()`` was called:
    ``queued`` means it had not, but it was scheduled before the cancelled
    caller's wake-up, so it still runs first (for redis-py's
    ``send_packed_command``: the request is written); ``done`` means
    ``wait_for`` returns its result and swallows the cancel."""
    for filename, _line, name, frame in reversed(frames):
        if name == "wait_for" and filename.replace("\\", "/").endswith("asyncio/tasks.py"):
            inner = frame.f_locals.get("fut")
            if isinstance(inner, asyncio.Task):
                if inner.done():
                    return " (wait_for's task: done)"
                state = inspect.getcoroutinestate(inner.get_coro())
                return {"CORO_CREATED": " (wait_for's task: queued)"}.get(state, " (wait_for's task: started)")
    return ""


#: Cancels that are no stop's doing: a lock's heartbeat stopped at its
#: release, redis-py's and asyncio's own timeouts.
_NOT_A_STOP = ("asyncio/timeouts.py", "async_timeout", "asyncio/tasks.py")


def _cause(caller) -> str | None:
    """Who called ``cancel()``: ``stop`` (agentscope's cancel dispatcher or
    run registry), ``passed on`` (asyncio handing a cancel to the task
    being awaited, from the event loop), ``re-armed`` is set by the
    caller; None for a timeout's cancel."""
    filename = caller.f_code.co_filename.replace("\\", "/")
    if any(part in filename for part in _NOT_A_STOP):
        return None
    if "/agentscope/app/_manager/" in filename:
        return "stop"
    if filename.endswith("asyncio/events.py") or caller.f_code.co_qualname == "TracedTask.cancel":
        # asyncio hands the cancel to the task being awaited (from the
        # awaiting task's own cancel(), or from the loop).
        return "passed on"
    return f"{_short(filename)}:{caller.f_code.co_qualname}"


class Tracer:
    """The landings noted while :attr:`on` is set."""

    def __init__(self) -> None:
        self.on = False
        self.landings: list[Landing] = []
        self.serial = 0

    def note(self, task: asyncio.Task, caller) -> None:
        if not self.on:
            return
        if task is asyncio.current_task():
            # Running: the cancel is thrown at the await it suspends in next.
            asyncio.get_running_loop().call_soon(self._note_now, task, "re-armed")
            return
        cause = _cause(caller)
        if cause is not None:
            self._note_now(task, cause)

    def _note_now(self, task: asyncio.Task, cause: str) -> None:
        if task.done():
            return
        found = landing(task, cause)
        if found is not None and "_heartbeat" not in found.task:
            self.landings.append(found)


TRACER = Tracer()


class TracedTask(asyncio.Task):
    """A task whose ``cancel()`` is noted by :data:`TRACER` first, and
    which carries a creation number (to tell a run from the next)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        TRACER.serial += 1
        self.serial = TRACER.serial

    def cancel(self, msg=None):  # noqa: D401 - asyncio's signature
        TRACER.note(self, sys._getframe(1))
        return super().cancel(msg)


def traced_task_factory(loop, coro, **kwargs):
    return TracedTask(coro, loop=loop, **kwargs)


# ── the buses: counting only ─────────────────────────────────────────


class CountingMixin:
    """Counts the calls the outcome needs. Delays nothing."""

    def reset_counts(self) -> None:
        self.counts: collections.Counter = collections.Counter()

    async def publish(self, key, payload):
        if key == MessageBusKeys.session_interrupt_channel():
            self.counts["interrupt publish"] += 1
        return await super().publish(key, payload)

    async def registry_del(self, namespace, field):
        if namespace.startswith(MessageBusKeys.inbox_consumer("")):
            self.counts["consumer registry_del"] += 1
        return await super().registry_del(namespace, field)

    async def log_trim(self, *args, **kwargs):
        self.counts["log_trim"] += 1
        return await super().log_trim(*args, **kwargs)


class CountingMemoryBus(CountingMixin, InMemoryMessageBus):
    pass


def counting_redis_bus(port: int):
    from agentscope.app.message_bus import RedisMessageBus

    class CountingRedisBus(CountingMixin, RedisMessageBus):
        pass

    return CountingRedisBus("127.0.0.1", port)


# ── the stories ──────────────────────────────────────────────────────


@dataclass
class Try:
    story: str
    number: int
    landings: list[Landing] = field(default_factory=list)
    presses: list[str] = field(default_factory=list)
    outcome: str = ""
    detail: str = ""

    def path(self, inner: bool = True) -> str:
        """The landing sites in order; without ``inner``, only agentscope's
        lines (the table's key)."""
        letters: dict[int, str] = {}
        for x in self.landings:
            letters.setdefault(x.serial, "ABCDEFGHIJ"[min(len(letters), 9)])
        return "\n         ".join(
            f"{n}. {x.text(letters[x.serial], inner)}" for n, x in enumerate(self.landings, 1)
        ) or "(no cancel reached agentscope code)"


async def stop_twice(app: App, agent: str, session: str, presses: list[str]) -> None:
    for label in ("stop 1", "stop 2"):
        before = app.bus.counts["interrupt publish"]
        status = await app.press_stop(agent, session)
        how = "published" if app.bus.counts["interrupt publish"] > before else "lock free: resume"
        presses.append(f"{label} {status} {how}")


async def registered(app: App, session: str) -> bool:
    return await app.bus.registry_get(
        MessageBusKeys.inbox_consumer(session), MessageBusKeys.INBOX_CONSUMER_FIELD,
    ) is not None


async def lock_left(app: App, session: str) -> str:
    """``, session lock left`` when the session lock is still taken with
    no run alive (a release that a cancel cut short), else empty."""
    alive = app.run_task(session) is not None
    held = await app.bus.is_locked(MessageBusKeys.session_lock(session))
    return ", session lock left" if held and not alive else ""


async def story_f8(app: App, t: Try) -> None:
    agent = await app.add_agent("solo")
    script = f"solo-f8-{t.number}"
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    app.script(script).add(Text("noted"))
    payload = f"channel: build {t.number} on main is red"

    async def user() -> None:
        await ui.wait_for("REPLY_END")
        await stop_twice(app, agent, session, t.presses)

    pressing = asyncio.create_task(user())
    TRACER.on = True
    await app.deliver(agent, session, hint(payload, "channel"))
    await asyncio.wait([pressing], timeout=10)
    await app.settle(timeout=5.0)
    TRACER.on = False
    stored = payload in await app.context_texts(agent, session)
    queued = payload in str(await app.bus.queue_drain(MessageBusKeys.inbox(session)))
    left = await registered(app, session)
    lost = not stored and not queued
    t.outcome = (", ".join(x for x in ("payload lost" if lost else "", "registration left" if left else "") if x)
                 or "clean") + await lock_left(app, session)
    t.detail = (f"stored: {stored}, in inbox: {queued}; consumer registry_del calls: "
                f"{app.bus.counts['consumer registry_del']}, log_trim: {app.bus.counts['log_trim']}")


async def story_f8b(app: App, t: Try) -> None:
    agent = await app.add_agent("solo")
    script = f"solo-f8b-{t.number}"
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    app.script(script).add(CallTool("GatedAction", {"note": f"deploy {t.number}"}), Text("deployed"))

    async def user() -> None:
        await ui.wait_for("REQUIRE_USER_CONFIRM")
        await stop_twice(app, agent, session, t.presses)

    pressing = asyncio.create_task(user())
    TRACER.on = True
    await app.post_chat(agent, session, "please deploy")
    await asyncio.wait([pressing], timeout=10)
    await app.settle(timeout=5.0)
    TRACER.on = False
    ends = [describe(e) for e in ui.reply_ends()]
    status = await app.parked_status(agent, session)
    left = await registered(app, session)
    if ends:
        main = "ended " + " + ".join(e.replace("REPLY_END finished_reason=", "") for e in ends)
    elif status == "idle":
        main = "card lost"
    else:
        main = f"stops lost, still parked ({status})"
    t.outcome = main + (", registration left" if left else "") + await lock_left(app, session)
    t.detail = (f"stored {status}; consumer registry_del calls: {app.bus.counts['consumer registry_del']}, "
                f"log_trim: {app.bus.counts['log_trim']}")


async def story_f11(app: App, t: Try) -> None:
    if not isinstance(app.desk.events, SignalList):
        app.desk.events = SignalList(app.desk.events)
    agent = await app.add_agent("leader")
    script = f"leader-f11-{t.number}"
    note = f"nightly build {t.number}"
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    app.script(script).add(CallTool("BackgroundJob", {"note": note}), Text("ok"))
    started = asyncio.Event()

    def on_tool(event) -> None:
        if event.kind == "run" and event.args.get("note") == note:
            started.set()

    app.desk.events.listeners.append(on_tool)
    TRACER.on = True
    await app.post_chat(agent, session, "run the nightly build")
    await started.wait()
    app.desk.events.listeners.remove(on_tool)
    mark = len(ui.events)
    await stop_twice(app, agent, session, t.presses)
    run = app.registry.get(session)
    if run is not None:
        await asyncio.wait([run], timeout=10)
    await app.settle(timeout=5.0)
    TRACER.on = False
    await asyncio.sleep(0.1)  # the UI's subscription catches up
    ends = [str(e.get("finished_reason")) for e in ui.reply_ends()]
    t.outcome = {0: "no REPLY_END", 1: f"ended once ({ends[0] if ends else ''})"}.get(
        len(ends), f"ended {len(ends)} times ({', '.join(ends)})") + await lock_left(app, session)
    t.detail = (f"stored {await app.parked_status(agent, session)}; events after the stops: "
                + ", ".join(event_type(e) for e in ui.events[mark:]))
    app.desk.finish_job(note)


STORIES = {"f8": story_f8, "f8b": story_f8b, "f11": story_f11}


async def one_try(bus, story: str, number: int, app: App | None) -> Try:
    """One try of ``story``: in ``app`` when given (the tries share it, as
    f8's scenario C does), else in a fresh app on ``bus``."""
    t = Try(story, number)
    bus.reset_counts()
    TRACER.landings = []
    try:
        if app is not None:
            await STORIES[story](app, t)
        else:
            async with app_on(bus) as fresh:
                await STORIES[story](fresh, t)
    except Exception as exc:  # noqa: BLE001 - recorded as the try's outcome
        TRACER.on = False
        first_line = (str(exc).splitlines() or [""])[0]
        t.outcome = f"CRASH: {type(exc).__name__}: {first_line}"
        t.detail = traceback.format_exc(limit=-3)
    t.landings = list(TRACER.landings)
    return t


def table(tries: list[Try]) -> None:
    """Path (agentscope's landing lines) -> tries, their outcomes, and for
    the last landing the library frames it waited in, with outcomes."""
    paths: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    inner: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for t in tries:
        paths[t.path(inner=False)][t.outcome] += 1
        if t.landings and t.landings[-1].inner:
            inner[t.path(inner=False)][f"{t.landings[-1].inner} => {t.outcome}"] += 1
    for path, outcomes in sorted(paths.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        say(f"   {sum(outcomes.values()):>3} x  {path}")
        say("          outcome: " + "; ".join(f"{o}: {n}" for o, n in outcomes.most_common()))
        for where, n in sorted(inner[path].items()):
            say(f"          last cancel waiting in {where}: {n}")


async def run_bus(name: str, bus, stories: list[str], tries: int, shared: bool) -> list[Try]:
    done: list[Try] = []
    for story in stories:
        how = "one app for all tries" if shared else "a fresh app per try"
        say(f"== {story} on {name}, {tries} tries, {how} (agentscope {VERSION})")
        if shared:
            async with app_on(bus) as app:
                batch = [await one_try(bus, story, n, app) for n in range(1, tries + 1)]
        else:
            batch = [await one_try(bus, story, n, None) for n in range(1, tries + 1)]
        for t in batch:
            say(f"   try {t.number}: {t.outcome}; presses: {'; '.join(t.presses)}; {t.detail.strip()}")
            say(f"      {t.path()}")
        say(f"-- {story} on {name}: paths")
        table(batch)
        done.extend(batch)
    return done


async def main(args: argparse.Namespace) -> int:
    asyncio.get_running_loop().set_task_factory(traced_task_factory)
    stories = args.story.split(",")
    tries: list[Try] = []
    for name in args.bus.split(","):
        if name == "memory":
            tries += await run_bus("InMemoryMessageBus", CountingMemoryBus(), stories, args.tries, args.shared_app)
        elif name == "redis":
            from _redis import RedisServerUnavailable, redis_server

            try:
                async with redis_server("trace") as server:
                    async with counting_redis_bus(server.port) as bus:
                        tries += await run_bus(f"RedisMessageBus (redis-server :{server.port})", bus,
                                               stories, args.tries, args.shared_app)
            except RedisServerUnavailable as exc:
                say(f"ERROR: {exc}")
                return 2
    crashed = [t for t in tries if t.outcome.startswith("CRASH")]
    for t in crashed:
        say(f"ERROR: {t.story} try {t.number} crashed: {t.outcome}\n{t.detail}")
    return 3 if crashed else 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--story", default="f8,f8b,f11")
    parser.add_argument("--bus", default="memory,redis")
    parser.add_argument("--shared-app", action="store_true",
                        help="one app for all tries of a story (as f8's scenario C), not one per try")
    parser.add_argument("--with-fix", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.with_fix:
        import reference_fix

        say("reference fixes applied: " + ", ".join(p.name for p in reference_fix.apply()))
    sys.exit(asyncio.run(main(arguments)))

"""A graceful shutdown during the auto-naming call keeps the card, and a
user's stop there ends the reply.

The promise it checks: a shutdown is not a stop. A session created from
the UI has ``naming.auto=True`` (``_router/_session.py``). Its first turn
calls ``GatedAction``: the call is stored ``ASKING`` and the card is
published (``REQUIRE_USER_CONFIRM``). After the reply and the state are
saved, ``ChatService._run_impl``'s ``finally`` calls
``_auto_name_session``, still under the session lock, which asks the
session's model for a title (``model.generate_structured_output``). If
the app shuts down gracefully then (the lifespan's exit: the cancel
dispatcher, the wake-up dispatcher, then ``ChatRunRegistry.__aexit__``,
which cancels every run in flight with a plain ``task.cancel()``), the
cancel lands in that model call. The reply must stay parked: after a
restart the card is still answerable, and the user's confirmation runs
the call.

A fix for F3 that takes every cancel after parking for a user's stop
breaks this: the shutdown's cancel queues a ``resume`` carrying a
``UserInterruptEvent``, and after the restart the parked reply ends
``INTERRUPTED`` and the card is gone. The reference fix
``stop-after-parking`` acts only on a cancel carrying the message
``"user interrupt"``, which ``CancelDispatcher._interrupt_session`` (as
patched) sends; this script checks that the shutdown path keeps the card,
with and without the reference fixes.

A. (counted) The shutdown. Node 1 (``_app.py``: agentscope's own app
   layer, real sqlite storage, ``InMemoryMessageBus``): the user's message
   through the chat endpoint; the model calls ``GatedAction``; the card is
   published. The naming model call takes 2 s, as a slow model does. Once
   it has started and the stored state shows the call ``ASKING`` (the
   reply is persisted), node 1 shuts down: ``App.close()``, the taps and
   then the exit stack in the lifespan's order. The model stand-in records
   the ``CancelledError`` that lands in it, its message, and the chain of
   awaits it unwinds. Node 2 opens on the same sqlite file and the same
   bus instance (standing for a shared bus), with the same user; its
   dispatcher drains the trigger queue on start. After 1 s, once no run is
   alive, the session lock is free and no trigger is queued:
   the stored call must still be ``ASKING``, the session
   ``awaiting_permission``, and no ``REPLY_END(INTERRUPTED)`` published for
   the reply (a subscriber on the bus sees both nodes' events). Then the
   user confirms through node 2's chat endpoint: the ``resume`` must run
   ``GatedAction`` exactly once (on neither node before) and end the reply
   ``completed``.
B. (control, information) The same story without a shutdown: the user
   presses stop (the interrupt route) during the naming call. With
   ``--with-fix`` the stop is honoured, ``REPLY_END(INTERRUPTED)``; without
   it the stop is lost (F3, scenario B). Not counted in the exit code.

How the window is hit: no hook on the bus. The naming call is 2 s wide;
the shutdown (or the stop) starts the moment the stand-in reports the
naming call started and a storage read shows the parked call saved. The
cancel lands in ``ChatService._auto_name_session``'s
``await model.generate_structured_output(...)`` (the stand-in's sleep in
``ScriptedChatModel._call_api``), which the script reports from the
cancel's own traceback.

Exit codes: 0 when in A the cancel landed in the naming call, the card
survived the restart and the confirmation's resume completed; 1 when the
card was lost (the call no longer ``ASKING``, or the reply ended
``INTERRUPTED``) or the resume did not complete (the regression); 2 when
the shutdown's cancel did not land in the naming call (window not hit);
3 when the story could not be set up (its cause is printed).

Releases: from 2.0.8 (2.0.7 has no auto-naming). Run on 2.0.8 and 2.0.11:
exit 0 on each, with and without ``--with-fix`` (B: the stop lost without
the fixes, honoured with them). Made to take every cancel after parking for
a stop (the fixes applied, then ``_end_parked_reply_on_stop`` handed a
``CancelledError("user interrupt")`` whatever reached the run), A fails as
it should: after the restart the reply has ended ``INTERRUPTED``, the call
is stored ``finished`` without having run, the session is idle; exit 1.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/shutdown_during_naming_keeps_card.py [--with-fix]
"""
from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import App, EventTap, VERSION, describe, in_memory_peek, quiet_agentscope, run_script, say  # noqa: E402
from agentscope.app import storage as app_storage  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ConfirmResult, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

BOOK = "shutdown-naming"
NAMING_SECS = 2.0


class SetupFailed(RuntimeError):
    """The story could not be set up (exit 3)."""


# ── the naming call's stand-in ──────────────────────────────────────────


@dataclass
class NamingCall:
    """What the slow naming call saw: that it started, and the cancel that
    landed in it (its message and the awaits it unwound)."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0
    cancelled: bool = False
    cancel_args: tuple = ()
    chain: list[str] = field(default_factory=list)

    @staticmethod
    def is_naming() -> bool:
        return any(f.name == "_auto_name_session" for f in traceback.extract_stack())

    async def while_answering(self, _script: str) -> None:
        """Every model call of node 1; the naming call takes NAMING_SECS."""
        if not self.is_naming():
            return
        self.calls += 1
        self.started.set()
        try:
            await asyncio.sleep(NAMING_SECS)
        except asyncio.CancelledError as exc:
            self.cancelled = True
            self.cancel_args = exc.args
            self.chain = [
                f"{f.name} ({Path(f.filename).name}:{f.lineno})"
                for f in traceback.extract_stack()
                if "agentscope" in f.filename or f.name in ("_call_api", "while_answering")
            ]
            raise

    def where(self) -> str:
        """The await the cancel landed in, from the outermost agentscope
        frame of the run down to the stand-in."""
        if not self.cancelled:
            return "no cancel landed in the naming call"
        return " > ".join(self.chain)


# ── one story ───────────────────────────────────────────────────────────


async def open_node(bus, basedir: Path, *, user_id: str | None = None, scripts=None) -> App:
    """An app on ``bus`` and ``basedir`` (the same user when ``user_id``);
    its scripts are loaded before its dispatchers start (node 2 drains on
    start)."""
    app = App(bus, basedir, BOOK)
    await app.open(start_dispatchers=False, user_id=user_id)
    if scripts:
        scripts(app)
    await app.start_dispatchers()
    return app


def node1_scripts(app: App) -> None:
    app.script("solo").add(CallTool("GatedAction", {"note": "deploy"}))
    app.script("solo").when_empty = (Text("deployed"),)


def node2_scripts(app: App) -> None:
    app.script("solo").when_empty = (Text("deployed"),)


async def stored_calls(app: App, agent: str, session: str) -> list[str]:
    calls = []
    for msg in await app.context(agent, session):
        for block in msg.get_content_blocks():
            if getattr(block, "type", None) == "tool_call":
                state = getattr(block, "state", None)
                calls.append(f"{block.name}:{getattr(state, 'value', state)}")
    return calls


def confirmation(card: dict) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(
        reply_id=card["reply_id"],
        confirm_results=[
            ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call))
            for call in card["tool_calls"]
        ],
    )


def ends_of(ui: EventTap, reply_id: str, since: int = 0) -> list[str]:
    """``REPLY_END`` events for ``reply_id`` the UI received from index
    ``since`` on, described."""
    return [
        describe(e) for e in ui.events[since:]
        if e.get("type") == "REPLY_END" and e.get("reply_id", reply_id) == reply_id
    ]


async def calm(app: App, session: str, quiet: float = 0.3, timeout: float = 10.0) -> None:
    """``App.settle``, and the session lock free with no trigger queued."""

    async def session_busy() -> bool:
        return await app.bus.is_locked(MessageBusKeys.session_lock(session)) or bool(
            in_memory_peek(app.bus, MessageBusKeys.wakeup_queue()),
        )

    await app.settle(quiet, timeout, busy_too=session_busy)


async def wait_until(check, timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()


@dataclass
class Outcome:
    window_hit: bool
    where: str
    cancel_args: tuple
    card_out: bool
    before_shutdown: list[str]
    after_restart: list[str] = field(default_factory=list)
    parked_after_restart: str = ""
    ends_after_restart: list[str] = field(default_factory=list)
    confirm_status: int | None = None
    ends_after_confirm: list[str] = field(default_factory=list)
    ran_node1: int = 0
    ran_node2: int = 0
    final_calls: list[str] = field(default_factory=list)

    @property
    def card_survived(self) -> bool:
        return (
            self.after_restart == ["GatedAction:asking"]
            and self.parked_after_restart == "awaiting_permission"
            and not any("interrupted" in e for e in self.ends_after_restart)
        )

    @property
    def resume_completed(self) -> bool:
        return (
            self.confirm_status == 200
            and self.ran_node1 == 0
            and self.ran_node2 == 1
            and any("finished_reason=completed" in e for e in self.ends_after_confirm)
            and not any("interrupted" in e or "error" in e for e in self.ends_after_confirm)
        )

    def problems(self) -> list[str]:
        found = []
        if not self.card_survived:
            found.append(
                f"the card was lost: after the restart the stored call is "
                f"{self.after_restart or 'gone'}, the session {self.parked_after_restart}, "
                f"REPLY_END for the reply: {self.ends_after_restart or 'none'}")
        elif not self.resume_completed:
            found.append(
                f"the confirmation's resume did not complete: chat {self.confirm_status}, "
                f"GatedAction ran {self.ran_node1} time(s) on node 1 and {self.ran_node2} on node 2, "
                f"REPLY_END after the confirmation: {self.ends_after_confirm or 'none'}")
        return found


async def shutdown_story() -> Outcome:
    """A: the shutdown during the naming call, the restart, the answer."""
    basedir = Path(tempfile.mkdtemp(prefix="confirm-naming-"))
    bus = InMemoryMessageBus()
    naming = NamingCall()
    ui: EventTap | None = None
    app1 = app2 = None
    try:
        app1 = await open_node(bus, basedir, scripts=node1_scripts)
        agent = await app1.add_agent("solo")
        session = await app1.add_session(agent, "solo", naming=app_storage.SessionNaming(auto=True))
        user_id = app1.user_id
        # The UI's subscriber, kept across both nodes (a shared bus).
        ui = await EventTap(bus, session).start()
        app1.book.while_answering = naming.while_answering
        status = await app1.post_chat(agent, session, "please deploy")
        card = await ui.wait_for("REQUIRE_USER_CONFIRM")
        await asyncio.wait_for(naming.started.wait(), 5.0)
        before = await stored_calls(app1, agent, session)
        if status != 200 or before != ["GatedAction:asking"] or app1.run_task(session) is None:
            raise SetupFailed(
                f"solo did not park before the naming call: chat {status}, stored calls {before}, "
                f"run alive: {app1.run_task(session) is not None}, events {ui.types()}")
        say("   card published, stored call GatedAction:asking, naming call in progress: shutting node 1 down")
        await app1.close()
        ran1 = len([e for e in app1.desk.runs("GatedAction") if e.session_id == session])
        outcome = Outcome(
            window_hit=naming.cancelled,
            where=naming.where(),
            cancel_args=naming.cancel_args,
            card_out=True,
            before_shutdown=before,
            ran_node1=ran1,
        )

        app2 = await open_node(bus, basedir, user_id=user_id, scripts=node2_scripts)
        await asyncio.sleep(1.0)
        await calm(app2, session)
        outcome.after_restart = await stored_calls(app2, agent, session)
        outcome.parked_after_restart = await app2.parked_status(agent, session)
        outcome.ends_after_restart = ends_of(ui, card["reply_id"])
        if outcome.card_survived:
            mark = len(ui.events)
            outcome.confirm_status = await app2.post_chat_event(agent, session, confirmation(card))
            await wait_until(lambda: ends_of(ui, card["reply_id"], mark), 10.0)
            await calm(app2, session)
            outcome.ends_after_confirm = ends_of(ui, card["reply_id"], mark)
            outcome.ran_node2 = len([e for e in app2.desk.runs("GatedAction") if e.session_id == session])
            outcome.final_calls = await stored_calls(app2, agent, session)
        return outcome
    finally:
        if ui is not None:
            await ui.stop()
        for app in (app2, app1):
            if app is not None:
                await app.close()  # a no-op once it has shut down
        shutil.rmtree(basedir, ignore_errors=True)


@dataclass
class StopOutcome:
    stop_status: int
    where: str
    cancel_args: tuple
    after_stop: list[str]
    parked: str

    @property
    def honoured(self) -> bool:
        return any("finished_reason=interrupted" in e for e in self.after_stop) and self.parked == "idle"


async def stop_story() -> StopOutcome:
    """B: the user's stop during the naming call, no shutdown."""
    basedir = Path(tempfile.mkdtemp(prefix="confirm-naming-"))
    bus = InMemoryMessageBus()
    naming = NamingCall()
    app = None
    try:
        app = await open_node(bus, basedir, scripts=node1_scripts)
        agent = await app.add_agent("solo")
        session = await app.add_session(agent, "solo", naming=app_storage.SessionNaming(auto=True))
        ui = await app.tap(session)
        app.book.while_answering = naming.while_answering
        status = await app.post_chat(agent, session, "please deploy")
        await ui.wait_for("REQUIRE_USER_CONFIRM")
        await asyncio.wait_for(naming.started.wait(), 5.0)
        before = await stored_calls(app, agent, session)
        if status != 200 or before != ["GatedAction:asking"]:
            raise SetupFailed(f"solo did not park before the naming call: chat {status}, stored calls {before}")
        mark = len(ui.events)
        stop_status = await app.press_stop(agent, session)
        await wait_until(lambda: naming.cancelled, 3.0)
        await calm(app, session, quiet=0.5)
        return StopOutcome(
            stop_status=stop_status,
            where=naming.where(),
            cancel_args=naming.cancel_args,
            after_stop=[describe(e) for e in ui.events[mark:]],
            parked=await app.parked_status(agent, session),
        )
    finally:
        if app is not None:
            await app.close()
        shutil.rmtree(basedir, ignore_errors=True)


async def main() -> int:
    quiet_agentscope()
    fixed = "--with-fix" in sys.argv[1:]
    say(f"agentscope {VERSION}{' with the reference fixes' if fixed else ''}")
    if not hasattr(app_storage, "SessionNaming"):
        say(f"setup failed (exit 3): agentscope {VERSION} has no auto-naming")
        return 3
    try:
        say("A. graceful shutdown during the auto-naming call of a parked reply; restart; the user confirms")
        a = await shutdown_story()
        say(f"   shutdown's cancel landed in the naming call: {a.window_hit}; "
            f"its message: {a.cancel_args or 'none'}")
        say(f"   where: {a.where}")
        say(f"   GatedAction ran on node 1: {a.ran_node1}")
        say(f"   after the restart: stored call {a.after_restart or 'none'}; session "
            f"{a.parked_after_restart}; REPLY_END for the reply: {a.ends_after_restart or 'none'}")
        say(f"   card survived the shutdown: {a.card_survived}")
        if a.card_survived:
            say(f"   confirmation through node 2's chat endpoint: HTTP {a.confirm_status}; "
                f"GatedAction ran on node 2: {a.ran_node2}; REPLY_END after it: "
                f"{a.ends_after_confirm or 'none'}; stored calls: {a.final_calls}")
            say(f"   resume completed: {a.resume_completed}")

        say("B. (control, information) the user presses stop during the naming call, no shutdown")
        b = await stop_story()
        say(f"   stop: HTTP {b.stop_status}; the cancel's message: {b.cancel_args or 'none'}; "
            f"landed in the naming call: {b.where != 'no cancel landed in the naming call'}")
        say(f"   events after the stop: {b.after_stop or 'none'}; session: {b.parked}")
        if b.honoured:
            say("   the stop was honoured: the reply ended INTERRUPTED")
        else:
            say("   the stop was lost: no REPLY_END(INTERRUPTED), the session stays parked (F3, scenario B)")
    except (SetupFailed, asyncio.TimeoutError) as failed:
        say(f"setup failed (exit 3): {failed!r}")
        return 3

    if not a.window_hit:
        say(f"window not hit on agentscope {VERSION}: the shutdown's cancel did not land in the naming call")
        return 2
    if a.problems():
        say(f"REGRESSION on agentscope {VERSION}: " + "; ".join(a.problems()))
        return 1
    say(f"HELD on agentscope {VERSION}: the card survived the shutdown and the confirmation's resume completed")
    return 0

if __name__ == "__main__":
    run_script(main)

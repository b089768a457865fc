"""agentscope's app on a plain asyncio loop, for the confirming scripts.

What agentscope's FastAPI lifespan wires, minus HTTP: ``ChatService``, the
run registry, ``WakeupDispatcher``, ``CancelDispatcher``,
``BackgroundTaskManager`` and a disabled ``SchedulerManager``, around the
bus the script hands in, on real storage (a sqlite file through aiosqlite),
the real ``LocalWorkspaceManager`` and ``DenyAllResourceAccessPolicy``.

Only two boundaries are fakes, both reached through agentscope's public
extension points: the chat model (``fakes/model.py``, a registered
credential type whose model plays scripted turns) and the tools
(``fakes/tool_desk.py``, handed in through ``extra_agent_tools``). The
parties call agentscope's own doors: the chat and interrupt route
functions, ``deliver_to_inbox``, ``enqueue_run_trigger``.

No scheduler, interleaver, controlled bus or virtual clock: everything runs
on ``asyncio.run``'s loop, in real time.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Any, Awaitable, Callable

#: A confirming script's exit code when it fails itself (a crash, an import
#: error, a fix that does not apply): never 1, which means "confirmed".
SCRIPT_ERROR = 3


def _exit_on_crash(kind, value, tb) -> None:
    """An exception no handler took (an import, a crash outside
    :func:`run_script`) exits with :data:`SCRIPT_ERROR`, not Python's 1."""
    traceback.print_exception(kind, value, tb)
    print(f"ERROR (exit {SCRIPT_ERROR}): the script itself failed: {kind.__name__}: {value}", flush=True)
    sys.stderr.flush()
    os._exit(SCRIPT_ERROR)


# Only when a script of this folder is the program, not when a test imports it.
if Path(getattr(sys.modules["__main__"], "__file__", "") or ".").resolve().parent == Path(__file__).resolve().parent:
    sys.excepthook = _exit_on_crash

# The scripts run from the repository root (see each script's docstring);
# make ``fakes`` importable when PYTHONPATH was not set.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import agentscope  # noqa: E402
from agentscope.agent import ContextConfig, ReActConfig  # noqa: E402
from agentscope.app import _bus_ops  # noqa: E402
from agentscope.app._bus_ops import enqueue_run_trigger  # noqa: E402
from agentscope.app._manager import (  # noqa: E402
    BackgroundTaskManager,
    CancelDispatcher,
    ChatRunRegistry,
    SchedulerManager,
    WakeupDispatcher,
)
from agentscope.app._router._chat import chat as chat_endpoint  # noqa: E402
from agentscope.app._router._schema import ChatRequest  # noqa: E402
from agentscope.app._router._session import interrupt_session  # noqa: E402
from agentscope.app._service import ChatService, ResourceAccessService  # noqa: E402
from agentscope.app.access import DenyAllResourceAccessPolicy  # noqa: E402
from agentscope.app.message_bus import MessageBus, MessageBusKeys  # noqa: E402
from agentscope.app.storage import (  # noqa: E402
    AgentData,
    AgentRecord,
    AsyncSQLAlchemyStorage,
    ChatModelConfig,
    SessionConfig,
    UserRecord,
)
from agentscope.app.workspace_manager import LocalWorkspaceManager  # noqa: E402
from agentscope.message import HintBlock, UserMsg  # noqa: E402
from agentscope.state import AgentState  # noqa: E402
from fastapi import HTTPException  # noqa: E402

from fakes.model import (  # noqa: E402
    ModelScript,
    ScriptBook,
    ScriptedCredential,
    register_scripted_credential,
)
from fakes.tool_desk import ToolDesk, tool_factory  # noqa: E402
# The wiring that changed between releases (2.0.3-2.0.6's managers took
# fewer arguments): the same shims the harness uses, nothing else of it.
from harness.world.surface import (  # noqa: E402
    assign_workspace_id,
    bind_workspaces,
    derive_parked_status,
    list_skills,
    scheduling_off,
    taken_by,
)

VERSION = agentscope.__version__


def say(text: str) -> None:
    """Print one line of the script's account, at once."""
    print(text, flush=True)


def quiet_agentscope() -> None:
    """agentscope logs the exceptions it swallows with full tracebacks;
    the scripts report what was published instead. ``CONFIRM_LOGS=1``
    shows agentscope's log again."""
    if os.environ.get("CONFIRM_LOGS"):
        logging.basicConfig(level=logging.INFO)
        return
    logging.getLogger("as").setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)


def hint(text: str, source: str) -> dict:
    """An inbox payload as team members and channels send it."""
    block = HintBlock(
        hint=text,
        source=json.dumps({"label": source, "sublabel": "confirm"}),
    )
    return block.model_dump(mode="json")


def event_type(event: dict) -> str:
    return str(event.get("type", "?"))


def describe(event: dict) -> str:
    """``REPLY_END finished_reason=error``, ``REQUIRE_USER_CONFIRM``..."""
    text = event_type(event)
    if event.get("finished_reason"):
        text += f" finished_reason={event['finished_reason']}"
    error = event.get("error")
    if isinstance(error, dict) and error.get("message"):
        text += f" ({error.get('type')}: {error['message']})"
    return text


class EventTap:
    """A live subscriber to one session's event channel: what the
    ``GET /sessions/{id}/stream`` SSE endpoint (the UI) sees."""

    def __init__(self, bus: MessageBus, session_id: str) -> None:
        self.events: list[dict] = []
        self._bus = bus
        self._key = MessageBusKeys.session_events(session_id)
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[dict], None]] = []
        self._task: asyncio.Task | None = None

    async def start(self) -> "EventTap":
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(ready), name="ui-stream")
        await ready.wait()
        return self

    async def _run(self, ready: asyncio.Event) -> None:
        async for event in self._bus.subscribe(self._key, on_ready=ready.set):
            self.events.append(event)
            for listener in list(self._listeners):
                listener(event)
            self._changed.set()

    def on_event(self, listener: Callable[[dict], None]) -> None:
        """Call ``listener(event)`` for every event from now on, as the
        subscriber receives it."""
        self._listeners.append(listener)

    def types(self) -> list[str]:
        return [event_type(e) for e in self.events]

    def reply_ends(self) -> list[dict]:
        return [e for e in self.events if event_type(e) == "REPLY_END"]

    async def wait_for(self, kind: str, timeout: float = 10.0) -> dict:
        """The first event of type ``kind`` (waiting for it if need be)."""

        async def _wait() -> dict:
            while True:
                for event in self.events:
                    if event_type(event) == kind:
                        return event
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(_wait(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class App:
    """agentscope's app in this process, on the bus handed in."""

    def __init__(self, bus: MessageBus, basedir: Path, book_name: str) -> None:
        self.bus = bus
        self.basedir = basedir
        self.book_name = book_name
        self.desk = ToolDesk()
        self._stack = contextlib.AsyncExitStack()
        self._taps: list[EventTap] = []

    # ── assembly ─────────────────────────────────────────────────────

    async def open(
        self,
        *,
        start_dispatchers: bool = True,
        user_id: str | None = None,
    ) -> "App":
        """Open storage, workspaces and the services; with ``user_id``
        reuse that user (another process of the same deployment made it),
        else add a user and its scripted-model credential."""
        register_scripted_credential()
        stack = self._stack
        self.book = ScriptBook.open(self.book_name)
        stack.callback(self.book.close)
        self.storage = await stack.enter_async_context(
            AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{self.basedir / 'app.db'}"),
        )
        self.workspace_manager = LocalWorkspaceManager(basedir=str(self.basedir / "ws"))
        bind_workspaces(self.workspace_manager, self.storage)
        await stack.enter_async_context(self.workspace_manager)
        self.background_tasks = await stack.enter_async_context(
            BackgroundTaskManager(message_bus=self.bus),
        )
        self.registry = await stack.enter_async_context(ChatRunRegistry())
        self.chat_service = ChatService(
            storage=self.storage,
            workspace_manager=self.workspace_manager,
            scheduler_manager=SchedulerManager(
                **taken_by(
                    SchedulerManager,
                    storage=self.storage,
                    message_bus=self.bus,
                    workspace_manager=self.workspace_manager,
                ),
                **scheduling_off(),
            ),
            background_task_manager=self.background_tasks,
            message_bus=self.bus,
            resource_access_service=ResourceAccessService(
                self.storage,
                DenyAllResourceAccessPolicy(),
            ),
            extra_agent_tools=tool_factory(self.desk),
        )
        self.dispatcher = WakeupDispatcher(
            self.bus,
            self.storage,
            self.chat_service,
            self.registry,
        )
        self.cancel_dispatcher = CancelDispatcher(
            message_bus=self.bus,
            registry=self.registry,
            bg_manager=self.background_tasks,
        )
        if user_id is None:
            await self._add_user()
        else:
            self.user_id = user_id
        if start_dispatchers:
            await self.start_dispatchers()
        return self

    async def start_dispatchers(self) -> None:
        """Start the wake-up, then the cancel dispatcher, as agentscope's
        lifespan does (the wake-up dispatcher drains the trigger queue
        once on start)."""
        await self.dispatcher.__aenter__()
        self._stack.push_async_callback(self.dispatcher.__aexit__, None, None, None)
        await self.cancel_dispatcher.__aenter__()
        self._stack.push_async_callback(self.cancel_dispatcher.__aexit__, None, None, None)

    async def close(self) -> None:
        for tap in self._taps:
            await tap.stop()
        await self._stack.aclose()

    async def _add_user(self) -> None:
        """The user, and the scripted-model credential it owns."""
        self.user_id = UserRecord().id
        self.credential_id = await self.storage.upsert_credential(
            self.user_id,
            ScriptedCredential(name="scripted", book=self.book_name),
        )

    async def add_agent(self, name: str) -> str:
        """An agent called ``name``; its sessions play the script ``name``."""
        data = AgentData.model_validate(
            {
                "name": name,
                "system_prompt": "You are a helpful assistant.",
                "context_config": ContextConfig(),
                "react_config": ReActConfig(),
            },
        )
        return await self.storage.upsert_agent(
            self.user_id,
            AgentRecord(user_id=self.user_id, data=data),
        )

    async def add_session(self, agent_id: str, script: str, **config: Any) -> str:
        """A session of ``agent_id`` playing ``script``; ``config`` goes
        into its ``SessionConfig`` (e.g. ``naming``)."""
        workspace_id = await assign_workspace_id(
            self.workspace_manager,
            user_id=self.user_id,
            agent_id=agent_id,
            session_id="",
        )
        record = await self.storage.upsert_session(
            user_id=self.user_id,
            agent_id=agent_id,
            config=SessionConfig(
                workspace_id=workspace_id,
                chat_model_config=ChatModelConfig(
                    type="scripted",
                    credential_id=self.credential_id,
                    model=script,
                    parameters={},
                ),
                **config,
            ),
            state=AgentState(),
        )
        # A workspace's first use spawns a subprocess: do it now.
        workspace = await self.workspace_manager.get_workspace(
            self.user_id,
            agent_id,
            record.id,
            workspace_id,
        )
        await list_skills(workspace, agent_id)
        return record.id

    def script(self, name: str) -> ModelScript:
        return self.book.script(name)

    async def tap(self, session_id: str) -> EventTap:
        """Subscribe to ``session_id``'s events as the UI does."""
        tap = await EventTap(self.bus, session_id).start()
        self._taps.append(tap)
        return tap

    # ── the parties, through agentscope's own doors ──────────────────

    async def post_chat(self, agent_id: str, session_id: str, text: str) -> int:
        """POST /chat/ as the user; the HTTP status it answers with."""
        request = ChatRequest(
            agent_id=agent_id,
            session_id=session_id,
            input=UserMsg(name="user", content=text),
        )
        try:
            await chat_endpoint(
                request,
                user_id=self.user_id,
                chat_service=self.chat_service,
                chat_run_registry=self.registry,
                message_bus=self.bus,
            )
        except HTTPException as refused:
            return refused.status_code
        return 200

    async def post_chat_event(self, agent_id: str, session_id: str, event: Any) -> int:
        """POST /chat/ with a confirmation or an external result; the
        endpoint queues a ``resume`` trigger for the dispatcher."""
        request = ChatRequest(agent_id=agent_id, session_id=session_id, input=event)
        await chat_endpoint(
            request,
            user_id=self.user_id,
            chat_service=self.chat_service,
            chat_run_registry=self.registry,
            message_bus=self.bus,
        )
        return 200

    async def press_stop(self, agent_id: str, session_id: str) -> int:
        """POST /sessions/{id}/interrupt as the user; its HTTP status."""
        try:
            await interrupt_session(
                session_id,
                agent_id=agent_id,
                user_id=self.user_id,
                chat_service=self.chat_service,
            )
        except HTTPException as refused:
            return refused.status_code
        return 202

    async def deliver(self, agent_id: str, session_id: str, payload: dict) -> None:
        """A team member or channel hands ``payload`` to the inbox:
        ``deliver_to_inbox`` (2.0.7 on); before, what every producer
        (``TeamSay``, ``AgentCreate``, ``AgentInvite``, the background tool's
        deliverer) did itself: push, then queue a ``wake`` trigger."""
        if hasattr(_bus_ops, "deliver_to_inbox"):
            await _bus_ops.deliver_to_inbox(
                self.bus,
                user_id=self.user_id,
                session_id=session_id,
                agent_id=agent_id,
                payload=payload,
            )
            return
        await self.bus.queue_push(MessageBusKeys.inbox(session_id), payload)
        await enqueue_run_trigger(
            self.bus,
            user_id=self.user_id,
            session_id=session_id,
            agent_id=agent_id,
        )

    async def queue_message(self, agent_id: str, session_id: str, text: str) -> None:
        """A channel's gateway queues a ``message`` trigger."""
        await enqueue_run_trigger(
            self.bus,
            self.user_id,
            session_id,
            agent_id,
            kind=MessageBusKeys.WAKEUP_KIND_MESSAGE,
            inputs=UserMsg(name="user", content=text),
        )

    # ── looking ──────────────────────────────────────────────────────

    def run_task(self, session_id: str) -> asyncio.Task | None:
        task = self.registry.get(session_id)
        return task if task is not None and not task.done() else None

    async def wait_run_done(self, session_id: str, timeout: float = 10.0) -> None:
        task = self.registry.get(session_id)
        if task is not None:
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), timeout)

    async def settle(
        self,
        quiet: float = 0.25,
        timeout: float = 15.0,
        *,
        ignore: tuple = (),
        busy_too: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """Wait until no run is alive and no dispatcher retry timer is
        pending (``ignore``: timers a script holds itself), and
        ``busy_too()`` says False when given, for ``quiet`` seconds in a
        row. Only the retry timers count (agentscope's ``<kind>-retry:``,
        dispatcher-survival's): a reference fix's long-lived task in the
        same set (``inbox-sweeper``'s sweeper) is no pending work."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        calm_since: float | None = None
        while loop.time() < deadline:
            busy = (
                any(not t.done() for t in self.registry._tasks.values())
                or any(
                    "-retry:" in t.get_name() and t not in ignore
                    for t in self.dispatcher._retry_tasks
                )
                or (busy_too is not None and await busy_too())
            )
            now = loop.time()
            if busy:
                calm_since = None
            elif calm_since is None:
                calm_since = now
            elif now - calm_since >= quiet:
                return
            await asyncio.sleep(0.02)

    async def context(self, agent_id: str, session_id: str) -> list:
        record = await self.storage.get_session(self.user_id, agent_id, session_id)
        return list(record.state.context) if record is not None else []

    async def parked_status(self, agent_id: str, session_id: str) -> str:
        """``idle``, ``awaiting_permission``... as agentscope derives it."""
        return derive_parked_status(await self.context(agent_id, session_id))

    async def context_texts(self, agent_id: str, session_id: str) -> str:
        """Every text, hint and tool output of the stored context."""
        parts: list[str] = []
        for msg in await self.context(agent_id, session_id):
            for block in msg.get_content_blocks():
                kind = getattr(block, "type", None)
                if kind == "text":
                    parts.append(block.text)
                elif kind == "hint":
                    parts.append(str(block.hint))
                elif kind == "tool_result":
                    parts.append(str(block.output))
        return "\n".join(parts)


def in_memory_peek(bus: MessageBus, key: str) -> list[dict]:
    """Entries queued at ``key`` on an ``InMemoryMessageBus``, without
    draining them (its queues are plain lists)."""
    return [payload for _id, payload, *_ in getattr(bus, "_queues", {}).get(key, [])]


@contextlib.asynccontextmanager
async def app_on(
    bus: MessageBus,
    *,
    basedir: Path | None = None,
    book: str = "confirm",
    **open_args: Any,
):
    """An :class:`App` on ``bus``, closed on exit. Without ``basedir`` it
    gets a fresh scratch folder, removed on exit; ``open_args`` go to
    :meth:`App.open`."""
    quiet_agentscope()
    own = basedir is None
    basedir = basedir or Path(tempfile.mkdtemp(prefix="confirm-"))
    app = App(bus, basedir, book)
    try:
        await app.open(**open_args)
        yield app
    finally:
        await app.close()
        if own:
            shutil.rmtree(basedir, ignore_errors=True)


def verdict(counted: list, missed: str, fine: str) -> int:
    """A counted scenario's exit code: 2 if no scenario of ``counted``
    (``(name, outcome)`` each, an outcome having ``window_hit`` and
    ``problems()``) hit its window (``missed`` says how), 1 if one that did
    shows a problem, 0 if none does (``fine`` says what held)."""
    hit = [(name, o) for name, o in counted if o.window_hit]
    if not hit:
        say(f"window not hit on agentscope {VERSION}: {missed}")
        return 2
    bad = [(name, o) for name, o in hit if o.problems()]
    for name, o in bad:
        say(f"CONFIRMED on agentscope {VERSION} ({name}): " + "; ".join(o.problems()))
    if bad:
        return 1
    say(f"not reproduced on agentscope {VERSION}: {fine}")
    return 0


def run_script(main: Callable[[], Awaitable[int]]) -> None:
    """Run a confirming script's ``main`` and exit with its code. With
    ``--with-fix`` the harness's reference fixes are applied first (exit 0
    is then expected). A failure of the script itself (an exception out of
    ``main``, a fix that cannot be applied) exits :data:`SCRIPT_ERROR`
    with its cause, so that exit 1 always means the finding was confirmed."""
    try:
        if "--with-fix" in sys.argv[1:]:
            import reference_fix

            print("reference fixes applied:", ", ".join(p.name for p in reference_fix.apply()))
        code = asyncio.run(main())
    except Exception as failed:  # noqa: BLE001 - the script's own failure, not the finding
        traceback.print_exc()
        say(f"ERROR (exit {SCRIPT_ERROR}): the script itself failed: {type(failed).__name__}: {failed}")
        code = SCRIPT_ERROR
    sys.exit(code)


class ChildNotReady(RuntimeError):
    """A script's child process ended before it said it was ready."""


@contextlib.asynccontextmanager
async def child_process(script: str, *args: str, ready: str, timeout: float = 30.0):
    """Start ``script`` again as the child of :func:`run_processes` (with
    ``args``, and ``--with-fix`` when this process has it) and read its
    lines until one starts with ``ready``; yields the process and what it
    said. The child is killed on exit if it still runs."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, script, "--process-a", *args,
        *(["--with-fix"] if "--with-fix" in sys.argv[1:] else []),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        said: list[str] = []
        while not any(line.startswith(ready) for line in said):
            line = await asyncio.wait_for(child.stdout.readline(), timeout)
            if not line:
                raise ChildNotReady(f"the child process ended before it said {ready}; it said {said}")
            said.append(line.decode().strip())
        yield child, said
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


def run_processes(main: Callable[[], Awaitable[int]], child: Callable[..., Awaitable[None]]) -> None:
    """:func:`run_script` for a script of two processes. Started again by
    its parent with ``--process-a ARG...``, the script is the child: it runs
    ``child(*ARGs)`` (under ``--with-fix`` with the reference fixes applied
    too) until the parent kills it."""
    if sys.argv[1:2] != ["--process-a"]:
        run_script(main)
    if "--with-fix" in sys.argv[1:]:
        import reference_fix

        reference_fix.apply()
    quiet_agentscope()
    asyncio.run(child(*[arg for arg in sys.argv[2:] if arg != "--with-fix"]))

"""agentscope's real app layer, assembled in-process.

The pieces are agentscope's own, wired the way its FastAPI lifespan wires
them. They come in two lifetimes:

- a :class:`Stage` lives as long as the process: SQL storage on a sqlite
  file, the local workspace manager, the user, the
  scripted-model credential and the agents with their warmed workspaces
  (creating a schema and warming a workspace cost far more than a story);
- a :class:`World` lives for one story: a fresh bus, the background-task
  and (disabled) scheduler managers, ``ChatService``, the run registry, the
  wake-up and cancel dispatchers, the model scripts, and new sessions and a
  new team.

Only the chat model and the extra tools are fakes, reached through public
extension points (a registered credential type, ``extra_agent_tools``).
Agents are built by :class:`HarnessAgent`, which turns off the runtime-state
injection that would read the wall clock. Ids and timestamps come from
agentscope's public hooks (:func:`install_deterministic_factories`).
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

import agentscope
from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
from agentscope.app._manager import (
    BackgroundTaskManager,
    CancelDispatcher,
    ChatRunRegistry,
    SchedulerManager,
    WakeupDispatcher,
)
from agentscope.app._service import (
    ChatService,
    ResourceAccessService,
)
from agentscope.app._tool._constants import HANDLE_LEN
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import MessageBus
from agentscope.app.storage import (
    AgentData,
    AgentRecord,
    AsyncSQLAlchemyStorage,
    ChatModelConfig,
    InviteConfig,
    SessionConfig,
    TeamData,
    TeamRecord,
    UserRecord,
)
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.state import AgentState

from fakes.model import (
    ModelScript,
    ScriptBook,
    ScriptedCredential,
    register_scripted_credential,
)
from fakes.permission_gate import ToolDesk, tool_factory

#: What timestamps read when the virtual clock says 0.
EPOCH = datetime(2026, 1, 1)

#: The ``type`` recorded in every session's model config.
SCRIPTED_PROVIDER = "scripted"


# --------------------------------------------------------------------------
# Deterministic ids and timestamps
# --------------------------------------------------------------------------


@dataclass
class IdCounter:
    """Hands out ids ``<story><count>000…`` (32 hex characters).

    The story number keeps ids unique in storage shared by many stories;
    the count comes early because agentscope derives an agent's invite
    handle from the first eight characters of its id.
    """

    story: int = 0
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def __call__(self) -> str:
        return f"{self.story:06x}{next(self.counter):06x}".ljust(32, "0")


def install_deterministic_factories(
    now: Callable[[], float],
    story: int = 0,
    epoch: datetime = EPOCH,
) -> IdCounter:
    """Make agentscope's ids count up and its timestamps read ``now()``.

    Both hooks are process-wide. They cover entity ids and content-block
    timestamps; some releases still stamp events and storage records with
    ``datetime.now()``, which the harness never reads.
    """
    ids = IdCounter(story)
    agentscope.set_id_factory(ids)
    agentscope.set_timestamp_factory(
        lambda: (epoch + timedelta(seconds=now())).isoformat(),
    )
    return ids


def restore_default_factories() -> None:
    """Put agentscope's own id and timestamp behaviour back."""
    agentscope.set_id_factory(lambda: uuid.uuid4().hex)
    agentscope.set_timestamp_factory(lambda: datetime.now().isoformat())


# --------------------------------------------------------------------------
# The agent class ChatService builds
# --------------------------------------------------------------------------


class HarnessAgent(Agent):
    """agentscope's ``Agent`` with runtime-state injection off by default.

    The injection writes the current wall-clock time into the context, so
    two runs of the same story would differ. ``ChatService`` builds agents
    through its ``custom_agent_cls`` parameter, which is how this is used.
    """

    def __init__(
        self,
        *args: Any,
        injection_config: InjectionConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            *args,
            injection_config=injection_config
            or InjectionConfig(inject_runtime_state=False),
            **kwargs,
        )


# --------------------------------------------------------------------------
# The stage: what outlives one story
# --------------------------------------------------------------------------

#: The script book every scripted credential reads; one open at a time.
BOOK_NAME = "harness"


@dataclass
class Member:
    """An agent of the stage and the session it was warmed up in."""

    name: str
    agent_id: str
    script: str
    """Name of the script its sessions play (see :class:`ScriptBook`)."""
    session_id: str
    """Its own primary session; invited workers borrow its workspace."""
    workspace_id: str


@dataclass
class Stage:
    """Storage, workspaces, the user and the agents, shared by stories."""

    basedir: Path
    storage: AsyncSQLAlchemyStorage
    workspace_manager: LocalWorkspaceManager
    user_id: str
    credential_id: str
    members: dict[str, Member] = field(default_factory=dict)
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def add_agent(
        self,
        name: str,
        *,
        invite_description: str | None = None,
        system_prompt: str = "You are a helpful assistant.",
    ) -> Member:
        """Store an agent with a warmed primary session playing script
        ``name``. With ``invite_description`` the agent is invitable, which
        is what makes agentscope offer ``AgentInvite`` to a team leader."""
        record = AgentRecord(
            user_id=self.user_id,
            data=_agent_data(name, system_prompt, invite_description),
        )
        agent_id = await self.storage.upsert_agent(self.user_id, record)
        workspace_id = await self.workspace_manager.assign_workspace_id(
            user_id=self.user_id,
            agent_id=agent_id,
            session_id="",
        )
        session_id = await new_session(self, agent_id, name, workspace_id, name)
        workspace = await self.workspace_manager.get_workspace(
            self.user_id,
            agent_id,
            session_id,
            workspace_id,
        )
        # A workspace's first use and an agent's first skill listing each
        # spawn a subprocess; do both here, never inside a story.
        await workspace.list_skills(agent_id=agent_id)
        member = Member(name, agent_id, name, session_id, workspace_id)
        self.members[name] = member
        return member

    async def close(self) -> None:
        """Close storage and workspaces."""
        await self._stack.aclose()


async def open_stage(basedir: str | Path, storage_url: str | None = None) -> Stage:
    """Open storage and workspaces under ``basedir``."""
    register_scripted_credential()
    basedir = Path(basedir)
    basedir.mkdir(parents=True, exist_ok=True)
    stack = AsyncExitStack()
    try:
        storage = await stack.enter_async_context(
            AsyncSQLAlchemyStorage(
                storage_url or f"sqlite+aiosqlite:///{basedir / 'world.db'}",
            ),
        )
        workspace_manager = LocalWorkspaceManager(basedir=str(basedir / "ws"))
        workspace_manager.bind_storage(storage)
        await stack.enter_async_context(workspace_manager)
        user_id = UserRecord().id
        credential_id = await storage.upsert_credential(
            user_id,
            ScriptedCredential(name="scripted", book=BOOK_NAME),
        )
        return Stage(
            basedir=basedir,
            storage=storage,
            workspace_manager=workspace_manager,
            user_id=user_id,
            credential_id=credential_id,
            _stack=stack,
        )
    except BaseException:
        await stack.aclose()
        raise


async def new_session(
    stage: Stage,
    agent_id: str,
    script: str,
    workspace_id: str,
    name: str,
) -> str:
    """A new session of ``agent_id`` playing ``script`` in a given
    (already warmed) workspace."""
    config = SessionConfig(
        workspace_id=workspace_id,
        name=name,
        chat_model_config=ChatModelConfig(
            type=SCRIPTED_PROVIDER,
            credential_id=stage.credential_id,
            model=script,
            parameters={},
        ),
    )
    record = await stage.storage.upsert_session(
        user_id=stage.user_id,
        agent_id=agent_id,
        config=config,
        state=AgentState(),
    )
    return record.id


# --------------------------------------------------------------------------
# The world: one story's app
# --------------------------------------------------------------------------


@dataclass
class World:
    """agentscope's app for one story, on a shared :class:`Stage`."""

    stage: Stage
    bus: MessageBus
    storage: Any
    """What agentscope was handed: the stage's storage, maybe wrapped."""
    background_tasks: BackgroundTaskManager
    scheduler: SchedulerManager
    chat_service: ChatService
    registry: "RunRegistry"
    dispatcher: WakeupDispatcher
    cancel_dispatcher: CancelDispatcher
    """Cancels this process' runs on the bus' interrupt and cancel
    channels (what ``ChatService.interrupt`` publishes to while a run holds
    the session lock)."""
    book: ScriptBook
    desk: ToolDesk
    sessions: dict[str, str] = field(default_factory=dict)
    """This story's session of each agent, by agent name."""
    teams: dict[str, str] = field(default_factory=dict)
    """This story's team ids, by the name of the agent leading each."""
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    @property
    def user_id(self) -> str:
        return self.stage.user_id

    def script(self, name: str) -> ModelScript:
        """The model script played by every session of agent ``name``."""
        return self.book.script(self.stage.members[name].script)

    def agent_id(self, name: str) -> str:
        return self.stage.members[name].agent_id

    async def open_session(self, name: str) -> str:
        """A fresh session of agent ``name`` for this story."""
        member = self.stage.members[name]
        session_id = await new_session(
            self.stage,
            member.agent_id,
            member.script,
            member.workspace_id,
            f"{name} (story)",
        )
        self.sessions[name] = session_id
        return session_id

    async def make_team(self, leader: str, team_name: str = "crew") -> str:
        """Make ``leader``'s story session lead a new, empty team."""
        storage = self.stage.storage
        team = TeamRecord(
            user_id=self.user_id,
            session_id=self.sessions[leader],
            leader_agent_id=self.agent_id(leader),
            data=TeamData(name=team_name, description="A test team."),
        )
        await storage.upsert_team(self.user_id, team)
        await storage.set_session_team_id(
            self.user_id,
            self.sessions[leader],
            team.id,
        )
        self.teams[leader] = team.id
        return team.id

    def invite_target(self, name: str) -> str:
        """The ``target`` argument ``AgentInvite`` expects for ``name``."""
        return f"{name}@{self.agent_id(name)[:HANDLE_LEN]}"

    async def team_session_of(self, name: str, leader: str) -> str | None:
        """The session agent ``name`` works in for ``leader``'s team, if
        invited."""
        if leader not in self.teams:
            return None
        team = await self.stage.storage.get_team(self.user_id, self.teams[leader])
        for member in team.data.members if team else []:
            if member.agent_id == self.agent_id(name):
                return member.session_id
        return None

    async def close(self) -> None:
        """Stop the dispatchers and managers, close the script book."""
        await self._stack.aclose()


class RunRegistry(ChatRunRegistry):
    """agentscope's run registry, also keeping every run task it spawned."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[asyncio.Task] = []
        self._died: set[asyncio.Task] = set()

    def spawn(self, coro, *, session_id: str, name: str | None = None):
        if super().get(session_id) in self._died:
            # That run's process is gone, and its registry with it: this
            # process never had the entry.
            del self._tasks[session_id]
        task = super().spawn(coro, session_id=session_id, name=name)
        self.spawned.append(task)
        return task

    def get(self, session_id: str):
        task = super().get(session_id)
        return None if task in self._died else task

    def process_died(self, task: asyncio.Task) -> None:
        """``task`` ran in a process that crashed: it is not this
        process' run any more (the dispatcher and the endpoint, which
        survive, must not see it)."""
        self._died.add(task)


def _scheduling_off() -> dict:
    """``enabled=False`` where ``SchedulerManager`` takes it (2.0.8 on);
    before that the manager is simply never started, so no APScheduler
    runs on the story's loop either way."""
    parameters = inspect.signature(SchedulerManager).parameters
    return {"enabled": False} if "enabled" in parameters else {}


async def build_world(
    stage: Stage,
    message_bus: MessageBus,
    *,
    wrap_storage: Callable[[Any], Any] | None = None,
) -> World:
    """agentscope's app for one story around ``message_bus``.

    The bus is the caller's: it is used, not entered or closed. The
    dispatchers are built but not started (see ``WakeupDispatcher``'s and
    ``CancelDispatcher``'s own ``__aenter__``); the caller starts them, in
    that order as agentscope's lifespan does, when it is ready to drive
    them.
    """
    storage = wrap_storage(stage.storage) if wrap_storage else stage.storage
    # Everything agentscope reaches storage through gets the same handle.
    stage.workspace_manager.bind_storage(storage)
    access = ResourceAccessService(storage, DenyAllResourceAccessPolicy())
    stack = AsyncExitStack()
    try:
        book = ScriptBook.open(BOOK_NAME)
        stack.callback(book.close)
        background_tasks = await stack.enter_async_context(
            BackgroundTaskManager(message_bus=message_bus),
        )
        registry = await stack.enter_async_context(RunRegistry())
        scheduler = SchedulerManager(
            storage=storage,
            message_bus=message_bus,
            workspace_manager=stage.workspace_manager,
            **_scheduling_off(),
        )
        if _scheduling_off():  # started as the app does, but with nothing to run
            await stack.enter_async_context(scheduler)
        desk = ToolDesk()
        chat_service = ChatService(
            storage=storage,
            workspace_manager=stage.workspace_manager,
            scheduler_manager=scheduler,
            background_task_manager=background_tasks,
            message_bus=message_bus,
            resource_access_service=access,
            extra_agent_tools=tool_factory(desk),
            custom_agent_cls=HarnessAgent,
        )
        dispatcher = WakeupDispatcher(message_bus, storage, chat_service, registry)
        stack.push_async_callback(dispatcher.__aexit__, None, None, None)
        cancel_dispatcher = CancelDispatcher(
            message_bus=message_bus,
            registry=registry,
            bg_manager=background_tasks,
        )
        stack.push_async_callback(cancel_dispatcher.__aexit__, None, None, None)
        return World(
            stage=stage,
            bus=message_bus,
            storage=storage,
            background_tasks=background_tasks,
            scheduler=scheduler,
            chat_service=chat_service,
            registry=registry,
            dispatcher=dispatcher,
            cancel_dispatcher=cancel_dispatcher,
            book=book,
            desk=desk,
            _stack=stack,
        )
    except BaseException:
        await stack.aclose()
        raise


def _agent_data(
    name: str,
    system_prompt: str,
    invite_description: str | None,
) -> AgentData:
    """Agent data in the flat shape every 2.0.x release accepts.

    2.0.10 moved these configs under ``chat_config`` and still folds the
    flat keys into it, so one shape serves all releases.
    """
    return AgentData.model_validate(
        {
            "name": name,
            "system_prompt": system_prompt,
            "context_config": ContextConfig(),
            "react_config": ReActConfig(),
            "invite_config": InviteConfig(
                invitable=invite_description is not None,
                invite_description=invite_description,
            ),
        },
    )

"""agentscope's app for one story, wired the way its FastAPI lifespan
wires it, on the process' :class:`~harness.world.stage.Stage`.

A fresh bus (the caller's), the background-task and (disabled) scheduler
managers, ``ChatService``, the run registry, the wake-up and cancel
dispatchers, the model scripts and the tool desk. Only the chat model and
the extra tools are fakes, reached through public extension points (a
registered credential type, ``extra_agent_tools``); agents are built by
:class:`HarnessAgent` through ``custom_agent_cls``.
"""
from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Callable

from agentscope.agent import Agent, InjectionConfig
from agentscope.app.access import DenyAllResourceAccessPolicy
from agentscope.app.message_bus import MessageBus
from agentscope.app.storage import TeamData, TeamRecord

from fakes.model import ModelScript, ScriptBook
from fakes.tool_desk import ToolDesk, tool_factory

from .stage import BOOK_NAME, Stage
from .storage_account import AccountedStorage
from .surface import (
    HANDLE_LEN,
    BackgroundTaskManager,
    CancelDispatcher,
    ChatRunRegistry,
    ChatService,
    ResourceAccessService,
    SchedulerManager,
    WakeupDispatcher,
    bind_workspaces,
    scheduling_off,
    taken_by,
)


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


@dataclass
class AgentscopeApp:
    """agentscope's app for one story, on the shared :class:`Stage`."""

    stage: Stage
    bus: MessageBus
    storage: Any
    """What agentscope was handed: the stage's storage, maybe wrapped."""
    background_tasks: BackgroundTaskManager
    scheduler_manager: SchedulerManager
    """agentscope's timed-job manager (disabled)."""
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
        session_id = await self.stage.new_session(
            member.agent_id,
            member.script,
            member.workspace_id,
            f"{name} (story)",
        )
        self.sessions[name] = session_id
        return session_id

    async def forget_story_sessions(self) -> None:
        """Delete the sessions this story opened and those agentscope made
        through the storage it was handed (see
        :meth:`~harness.world.stage.Stage.forget_story_sessions`)."""
        opened = [(self.agent_id(name), session_id) for name, session_id in self.sessions.items()]
        made = self.storage.sessions_upserted() if isinstance(self.storage, AccountedStorage) else None
        # Deleted by name, or never: the primary sessions.
        by_name = {session_id for _, session_id in opened} | {
            member.session_id for member in self.stage.members.values()
        }
        minted_for = None if made is None else {
            agent_id for agent_id, session_id in made if session_id not in by_name
        }
        await self.stage.forget_story_sessions(opened, minted_for)

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
            del self._tasks[session_id]  # agentscope's own map of live runs
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


async def build_app(
    stage: Stage,
    message_bus: MessageBus,
    *,
    wrap_storage: Callable[[Any], Any] | None = None,
    sharing_with: AgentscopeApp | None = None,
    book: ScriptBook | None = None,
) -> AgentscopeApp:
    """agentscope's app for one story around ``message_bus``.

    The bus is the caller's: it is used, not entered or closed. The
    dispatchers are built but not started (see ``WakeupDispatcher``'s and
    ``CancelDispatcher``'s own ``__aenter__``); the caller starts them, in
    that order as agentscope's lifespan does, when it is ready to drive
    them. Another node of the same story passes the first node's app as
    ``sharing_with``: the story's sessions, teams, model scripts and tool
    desk are one, whichever process serves them. The script book is
    ``book`` when one is handed in (its owner closes it: the story, which
    outlives a restarted process), else opened here and closed with the app.
    """
    storage = wrap_storage(stage.storage) if wrap_storage else stage.storage
    # Everything agentscope reaches storage through gets the same handle.
    bind_workspaces(stage.workspace_manager, storage)
    access = ResourceAccessService(storage, DenyAllResourceAccessPolicy())
    stack = AsyncExitStack()
    try:
        if sharing_with is not None:
            book = sharing_with.book
        elif book is None:
            book = ScriptBook.open(BOOK_NAME)
            stack.callback(book.close)
        background_tasks = await stack.enter_async_context(
            BackgroundTaskManager(message_bus=message_bus),
        )
        registry = await stack.enter_async_context(RunRegistry())
        scheduler_manager = SchedulerManager(
            **taken_by(
                SchedulerManager,
                storage=storage,
                message_bus=message_bus,
                workspace_manager=stage.workspace_manager,
            ),
            **scheduling_off(),
        )
        if scheduling_off():  # started as the app does, but with nothing to run
            await stack.enter_async_context(scheduler_manager)
        desk = ToolDesk() if sharing_with is None else sharing_with.desk
        chat_service = ChatService(
            storage=storage,
            workspace_manager=stage.workspace_manager,
            scheduler_manager=scheduler_manager,
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
        app = AgentscopeApp(
            stage=stage,
            bus=message_bus,
            storage=storage,
            background_tasks=background_tasks,
            scheduler_manager=scheduler_manager,
            chat_service=chat_service,
            registry=registry,
            dispatcher=dispatcher,
            cancel_dispatcher=cancel_dispatcher,
            book=book,
            desk=desk,
            _stack=stack,
        )
        if sharing_with is not None:
            app.sessions, app.teams = sharing_with.sessions, sharing_with.teams
        return app
    except BaseException:
        await stack.aclose()
        raise

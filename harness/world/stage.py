"""The stage: what every story in one process shares.

One event loop on one virtual clock, SQL storage on a sqlite file, the
local workspace manager, the user, the scripted-model credential and the
agents of :mod:`~harness.world.cast` with their warmed workspaces. Creating
a schema and warming a workspace cost far more than a story, and SQL
storage is bound to the loop it was opened on, so one stage serves every
story of the process; each story's :class:`~harness.world.world.World`
gets its own interleaver, bus and app on it.

(A file, not ``sqlite+aiosqlite:///:memory:``: there all sessions share
one connection, and one session's transaction can discard another's state
write.)
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from agentscope.agent import ContextConfig, ReActConfig
from agentscope.app.storage import (
    AgentData,
    AgentRecord,
    AsyncSQLAlchemyStorage,
    ChatModelConfig,
    InviteConfig,
    SessionConfig,
    UserRecord,
)
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.state import AgentState

from fakes.model import ScriptedCredential, register_scripted_credential
from harness.kernel.clock import VirtualClock
from harness.kernel.event_loop import VirtualTimeEventLoop
from harness.kernel.redis_server import RedisServer

from .cast import AIDE, CHIEF, HELPER, INVITE_DESCRIPTIONS, LEADER, SOLO, WORKER
from .ids import install_deterministic_factories
from .quiet import silence_agentscope
from .surface import assign_workspace_id, bind_workspaces, list_skills

#: The script book every scripted credential reads; one open at a time.
BOOK_NAME = "harness"

#: The ``type`` recorded in every session's model config.
SCRIPTED_PROVIDER = "scripted"


@dataclass
class Member:
    """An agent of the stage and the session it was warmed up in."""

    name: str
    agent_id: str
    script: str
    """Name of the script its sessions play (see ``fakes.model.ScriptBook``)."""
    session_id: str
    """Its own primary session; invited workers borrow its workspace."""
    workspace_id: str


class Stage:
    """The loop, the clock, storage, workspaces, the user and the agents."""

    _current: "Stage | None" = None

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.loop = VirtualTimeEventLoop(self.clock)
        self.basedir = Path(tempfile.mkdtemp(prefix="hitl-stage-", dir=_scratch_dir()))
        #: How many stories this stage has played (their ids carry it).
        self.stories = 0
        self.members: dict[str, Member] = {}
        self._redis: RedisServer | None = None
        self._stack = AsyncExitStack()
        self.loop.run_until_complete(self._open())
        silence_agentscope()  # after agentscope configured its own logger
        atexit.register(self.close)

    @classmethod
    def shared(cls) -> "Stage":
        """The process' stage, opened on first use."""
        if cls._current is None:
            cls._current = cls()
        return cls._current

    def redis_server(self) -> RedisServer:
        """The process' redis-server, started on first use (a missing
        binary is one line naming the package to install)."""
        if self._redis is None:
            self._redis = RedisServer.start()
        return self._redis

    async def _open(self) -> None:
        install_deterministic_factories(self.clock.timestamp, story=0)
        register_scripted_credential()
        self.storage = await self._stack.enter_async_context(
            AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{self.basedir / 'world.db'}"),
        )
        self.workspace_manager = LocalWorkspaceManager(basedir=str(self.basedir / "ws"))
        bind_workspaces(self.workspace_manager, self.storage)
        await self._stack.enter_async_context(self.workspace_manager)
        self.user_id = UserRecord().id
        self.credential_id = await self.storage.upsert_credential(
            self.user_id,
            ScriptedCredential(name="scripted", book=BOOK_NAME),
        )
        # The first three come first, so that their ids stay as they were
        # before the second team joined.
        for name in (LEADER, WORKER, SOLO, HELPER, CHIEF, AIDE):
            await self._add_agent(name, INVITE_DESCRIPTIONS.get(name))

    async def _add_agent(self, name: str, invite_description: str | None) -> Member:
        """Store an agent with a warmed primary session playing script
        ``name``. With ``invite_description`` the agent is invitable, which
        is what makes agentscope offer ``AgentInvite`` to a team leader."""
        record = AgentRecord(
            user_id=self.user_id,
            data=_agent_data(name, "You are a helpful assistant.", invite_description),
        )
        agent_id = await self.storage.upsert_agent(self.user_id, record)
        workspace_id = await assign_workspace_id(
            self.workspace_manager,
            user_id=self.user_id,
            agent_id=agent_id,
            session_id="",
        )
        session_id = await self.new_session(agent_id, name, workspace_id, name)
        workspace = await self.workspace_manager.get_workspace(
            self.user_id,
            agent_id,
            session_id,
            workspace_id,
        )
        # A workspace's first use and an agent's first skill listing each
        # spawn a subprocess; do both here, never inside a story.
        await list_skills(workspace, agent_id)
        member = Member(name, agent_id, name, session_id, workspace_id)
        self.members[name] = member
        return member

    async def new_session(
        self,
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
                credential_id=self.credential_id,
                model=script,
                parameters={},
            ),
        )
        record = await self.storage.upsert_session(
            user_id=self.user_id,
            agent_id=agent_id,
            config=config,
            state=AgentState(),
        )
        return record.id

    async def forget_story_sessions(
        self,
        opened: list[tuple[str, str]],
        minted_for: set[str] | None,
    ) -> None:
        """Delete the sessions a story made (with their messages and the
        teams they led, whose members' sessions agentscope deletes with
        them), through the storage's own ``delete_session``: those it
        ``opened``, ``(agent_id, session_id)`` each, then any left of the
        agents agentscope made sessions for (``minted_for``; ``None``: it
        is not known for which, so of every agent).

        ``AgentInvite`` lists all of the invited agent's sessions; kept,
        they would make each story's invitations slower than the last and
        let one story see another's sessions, which a replay in a fresh
        process would not. Only the warmed primary sessions stay.
        """
        for agent_id, session_id in opened:
            await self.storage.delete_session(self.user_id, agent_id, session_id)
        for member in self.members.values():
            if minted_for is None or member.agent_id in minted_for:
                for record in await self.storage.list_sessions(self.user_id, member.agent_id):
                    if record.id != member.session_id:
                        await self.storage.delete_session(self.user_id, member.agent_id, record.id)

    def close(self) -> None:
        """Close storage and workspaces, the loop, and the scratch folder."""
        if self.loop.is_closed():
            return
        self.loop.set_task_factory(None)
        self.loop.run_until_complete(self._stack.aclose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        if self._redis is not None:
            self._redis.stop()
        shutil.rmtree(self.basedir, ignore_errors=True)


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


def _scratch_dir() -> str | None:
    """Where the sqlite file and workspaces live: memory-backed
    ``/dev/shm`` when the machine has it (no fsync cost), else the default
    temporary directory."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None

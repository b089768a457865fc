"""Tools whose permission outcome the test decides, not a policy.

Under agentscope's default permission mode each tool here takes one of the
paths a real tool call can take:

- :class:`GatedAction` asks (``PASSTHROUGH`` by default): the call parks in
  ``ASKING`` and the agent emits ``REQUIRE_USER_CONFIRM``.
- :class:`ExternalJob` is an external tool that is allowed: the call parks
  in ``SUBMITTED`` and the agent emits ``REQUIRE_EXTERNAL_EXECUTION``.
- :class:`ForbiddenAction` is denied and never runs.
- :class:`BatchGatedAction` and :class:`BatchExternalJob` behave like the
  first two but are concurrency-safe, so several of them in one model turn
  run as one concurrent batch and park together.
- :class:`BackgroundJob` is allowed and runs until the test finishes it:
  past agentscope's offload timeout (10 virtual seconds) its call goes on
  in the background, and its result reaches the session's inbox when the
  test finishes it.

All of them read their decision from one :class:`ToolDesk`, which records
every permission check and every run.

Implements agentscope's ``ToolBase`` (handed to ``ChatService`` through its
``extra_agent_tools`` factory). Stands in for a deployment's own tools and
its permission policy; differs in that decisions are fixed per tool.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from agentscope.message import TextBlock
from agentscope.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
)
from agentscope.tool import ToolBase, ToolChunk

GATED_ACTION = "GatedAction"
EXTERNAL_JOB = "ExternalJob"
FORBIDDEN_ACTION = "ForbiddenAction"
BATCH_GATED_ACTION = "BatchGatedAction"
BATCH_EXTERNAL_JOB = "BatchExternalJob"
BACKGROUND_JOB = "BackgroundJob"

_NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "description": "Free text."},
    },
}

ToolFactory = Callable[[str, str, str], Awaitable[list[ToolBase]]]


@dataclass(frozen=True)
class ToolEvent:
    """A permission check or a run of one desk tool."""

    kind: str
    """``"check"``, ``"run"``, or for a background job ``"finished"`` or
    ``"stopped"`` (its call was cancelled)."""
    tool: str
    session_id: str
    args: dict[str, Any]


@dataclass
class ToolDesk:
    """The permission decisions the tools return, and what they saw."""

    decisions: dict[str, PermissionBehavior] = field(
        default_factory=lambda: {
            GATED_ACTION: PermissionBehavior.PASSTHROUGH,
            EXTERNAL_JOB: PermissionBehavior.ALLOW,
            FORBIDDEN_ACTION: PermissionBehavior.DENY,
            BATCH_GATED_ACTION: PermissionBehavior.PASSTHROUGH,
            BATCH_EXTERNAL_JOB: PermissionBehavior.ALLOW,
            BACKGROUND_JOB: PermissionBehavior.ALLOW,
        },
    )
    events: list[ToolEvent] = field(default_factory=list)
    #: One "may finish" signal per background job, by its note.
    _job_signals: dict[str, asyncio.Event] = field(default_factory=dict)

    def job_signal(self, note: str) -> asyncio.Event:
        """What the background job ``note`` waits for to finish."""
        return self._job_signals.setdefault(note, asyncio.Event())

    def running_jobs(self, session_id: str) -> list[str]:
        """Notes of the session's background jobs that started and have
        neither finished nor been stopped, oldest first."""
        ended = {
            e.args["note"] for e in self.events if e.kind in ("finished", "stopped")
        }
        return [
            e.args["note"]
            for e in self.events
            if e.kind == "run"
            and e.tool == BACKGROUND_JOB
            and e.session_id == session_id
            and e.args["note"] not in ended
            and not self.job_signal(e.args["note"]).is_set()
        ]

    def finish_job(self, note: str) -> None:
        """Let the background job ``note`` finish."""
        self.job_signal(note).set()

    def runs(self, tool: str | None = None) -> list[ToolEvent]:
        """Every run recorded, optionally of one tool only."""
        return [
            e
            for e in self.events
            if e.kind == "run" and (tool is None or e.tool == tool)
        ]


class _DeskTool(ToolBase):
    """A tool bound to one session that reports to a :class:`ToolDesk`."""

    name: str
    description: str
    input_schema: dict[str, Any] = _NOTE_SCHEMA
    is_concurrency_safe: bool = False
    is_read_only: bool = False

    def __init__(self, desk: ToolDesk, session_id: str) -> None:
        super().__init__()
        self._desk = desk
        self._session_id = session_id

    async def check_permissions(
        self,
        tool_input: dict[str, Any],
        context: PermissionContext,
    ) -> PermissionDecision:
        self._record("check", tool_input)
        behavior = self._desk.decisions[self.name]
        return PermissionDecision(
            behavior=behavior,
            message=f"{self.name}: {behavior.value} (set by the test)",
        )

    async def call(self, note: str = "") -> ToolChunk:
        self._record("run", {"note": note})
        return ToolChunk(content=[TextBlock(text=f"{self.name} ran: {note}")])

    def _record(self, kind: str, args: dict[str, Any]) -> None:
        self._desk.events.append(
            ToolEvent(kind, self.name, self._session_id, dict(args)),
        )


class GatedAction(_DeskTool):
    """A write that needs the user's go-ahead."""

    name = GATED_ACTION
    description = "Change something outside; the user must confirm it."


class ExternalJob(_DeskTool):
    """Work the agent hands to someone else and waits for."""

    name = EXTERNAL_JOB
    description = "Submit a job that an outside system runs."
    is_external_tool = True


class ForbiddenAction(_DeskTool):
    """Something the agent is never allowed to do."""

    name = FORBIDDEN_ACTION
    description = "Something that is always refused."


class BatchGatedAction(GatedAction):
    """A :class:`GatedAction` that may run beside other calls."""

    name = BATCH_GATED_ACTION
    is_concurrency_safe = True


class BatchExternalJob(ExternalJob):
    """An :class:`ExternalJob` that may run beside other calls."""

    name = BATCH_EXTERNAL_JOB
    is_concurrency_safe = True


class BackgroundJob(_DeskTool):
    """A long job that ends when the test says so (``ToolDesk.finish_job``).

    Allowed and not external, so agentscope's ``ToolOffloadMiddleware``
    moves it to the background once it has run for 10 seconds; the desk
    records whether it finished or was stopped (cancelled)."""

    name = BACKGROUND_JOB
    description = "Run a long job; it may go on in the background."

    async def call(self, note: str = "") -> ToolChunk:
        self._record("run", {"note": note})
        try:
            await self._desk.job_signal(note).wait()
        except asyncio.CancelledError:
            self._record("stopped", {"note": note})
            raise
        self._record("finished", {"note": note})
        return ToolChunk(content=[TextBlock(text=job_output(note))])


def job_output(note: str) -> str:
    """What the background job ``note`` returns when it finishes."""
    return f"job output: {note} finished"


def desk_tools(desk: ToolDesk, session_id: str) -> list[ToolBase]:
    """One of each desk tool, bound to ``session_id``."""
    return [
        GatedAction(desk, session_id),
        ExternalJob(desk, session_id),
        ForbiddenAction(desk, session_id),
        BatchGatedAction(desk, session_id),
        BatchExternalJob(desk, session_id),
        BackgroundJob(desk, session_id),
    ]


def tool_factory(desk: ToolDesk) -> ToolFactory:
    """The ``extra_agent_tools`` factory ``ChatService`` calls per run."""

    async def factory(
        user_id: str,
        agent_id: str,
        session_id: str,
    ) -> list[ToolBase]:
        del user_id, agent_id
        return desk_tools(desk, session_id)

    return factory

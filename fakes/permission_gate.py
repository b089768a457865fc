"""Tools whose permission outcome the test decides, not a policy.

Under agentscope's default permission mode each tool here takes one of the
paths a real tool call can take:

- :class:`GatedAction` asks (``PASSTHROUGH`` by default): the call parks in
  ``ASKING`` and the agent emits ``REQUIRE_USER_CONFIRM``.
- :class:`ExternalJob` is an external tool that is allowed: the call parks
  in ``SUBMITTED`` and the agent emits ``REQUIRE_EXTERNAL_EXECUTION``.
- :class:`LocalLookup` is allowed and runs at once.
- :class:`ForbiddenAction` is denied and never runs.
- :class:`BatchGatedAction` and :class:`BatchExternalJob` behave like the
  first two but are concurrency-safe, so several of them in one model turn
  run as one concurrent batch and park together.

All four read their decision from one :class:`ToolDesk`, which the test can
change at any time and which records every permission check and every run.
"""
from __future__ import annotations

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
LOCAL_LOOKUP = "LocalLookup"
FORBIDDEN_ACTION = "ForbiddenAction"
BATCH_GATED_ACTION = "BatchGatedAction"
BATCH_EXTERNAL_JOB = "BatchExternalJob"

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
    """``"check"`` or ``"run"``."""
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
            LOCAL_LOOKUP: PermissionBehavior.ALLOW,
            FORBIDDEN_ACTION: PermissionBehavior.DENY,
            BATCH_GATED_ACTION: PermissionBehavior.PASSTHROUGH,
            BATCH_EXTERNAL_JOB: PermissionBehavior.ALLOW,
        },
    )
    events: list[ToolEvent] = field(default_factory=list)

    def decide(self, tool: str, behavior: PermissionBehavior) -> None:
        """Make ``tool`` return ``behavior`` from now on."""
        self.decisions[tool] = behavior

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


class LocalLookup(_DeskTool):
    """A harmless action that runs straight away.

    Not marked read-only, so its decision still comes from the desk rather
    than from agentscope's read-only fast path.
    """

    name = LOCAL_LOOKUP
    description = "Look something up; allowed unless the test says so."


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


def desk_tools(desk: ToolDesk, session_id: str) -> list[ToolBase]:
    """One of each desk tool, bound to ``session_id``."""
    return [
        GatedAction(desk, session_id),
        ExternalJob(desk, session_id),
        LocalLookup(desk, session_id),
        ForbiddenAction(desk, session_id),
        BatchGatedAction(desk, session_id),
        BatchExternalJob(desk, session_id),
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

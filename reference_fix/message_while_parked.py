"""A message to a session parked on a pending call: refused, or kept.

The bug (every release 2.0.7–2.0.11, finding F2, property I8): while the
agent waits for the user's confirmation of a tool call (ASKING) or for an
external result (SUBMITTED), a new message reaches a fresh run, the agent
rejects it (``Agent._check_incoming_event``: it is waiting for an answer),
and the run ends with ``ReplyEnd(ERROR)`` typed "setup" ("The session could
not be prepared"). The message never reaches the agent's context. The chat
endpoint accepted it (it answers 409 only while a run of the session is in
flight in its own process), and a channel's message, queued as a
``message`` trigger, meets the same end through the wake-up dispatcher.

The fix, in two places, one for each way in:

- **The chat endpoint refuses the message (409)** while the session's
  stored state is parked on a call, as upstream PR #2779 proposes: the
  user is there to be told, and the answer says what to do (answer the
  card, or stop the reply). ``ChatService.awaiting_tool_calls`` reads the
  stored state the way the agent will (``get_awaiting_tool_calls``).
- **A run that finds its agent parked keeps the message for after the
  resume** instead of failing: it queues it in the session's inbox as a
  hint, and the resuming run's first reasoning step drains it
  (``InboxMiddleware``), as it drains everything else that arrived while
  the agent waited. Refusing is not possible there: nobody waits for an
  answer. A channel's message is queued by its gateway and reaches the run
  through the dispatcher, and a message the endpoint accepted may reach the
  run only after a run in another process parked the agent (the endpoint
  reads the stored state, which a run holding the session has not written
  yet). Dropping it with a logged warning would lose what the user wrote
  with no word to them, which is the bug with a quieter ending; keeping it
  is what the channel gateway already does with a message that finds a
  reply in flight (it pushes it to the inbox as a hint). The hint names
  the sender (``{"label": "user", "sublabel": <name>}``).

Three patches: ``ChatService`` gains the two helpers (added after
:meth:`ChatService.run`), the chat route calls the first, and
``_run_impl`` calls the second where it already drops a parked wake-up
(``_skip_parked_wakeup``); the run's ``finally`` is not touched. The parts
call each other, so each refuses a release where any of them would; they
share the fix's name, and its diff (``patches/agentscope-<release>-
message-while-parked.diff``) holds all three.
:func:`unified_diff` renders the three as one diff per file.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose source holds the code the three patches replace.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

#: The property the fix makes hold there.
COVERS = ("I8",)

#: The agentscope module of ``ChatService``.
SERVICE = "agentscope.app._service._chat"


class _Part(SourcePatch):
    """One of the fix's patches. The parts call each other, so each
    refuses wherever one of them does (the fix applies whole or not at
    all), and each gives the whole fix's diff as its upstream form."""

    def refusal(self) -> str | None:
        return next(filter(None, (SourcePatch.refusal(p) for p in PATCHES)), None)

    def unified_diff(self) -> str:
        return unified_diff()


def _patch(cls: str | None, method: str, before: str, after: str, what: str,
           module: str = SERVICE) -> SourcePatch:
    """One of the fix's patches: all share its name and releases."""
    return _Part(
        name="message-while-parked", module=module, cls=cls, method=method,
        before=before, after=after, targets=TARGET_RELEASES, covers=COVERS, what=what,
    )

# ── ChatService: the two helpers, added after ``run`` ─────────────────

RUN_TAIL = """\
        except Exception as e:
            logger.exception(
                "ChatService.run failed for user_id=%s session_id=%s "
                "agent_id=%s, error=%s",
                user_id,
                session_id,
                agent_id,
                str(e),
            )
"""

HELPERS = RUN_TAIL + '''
    async def awaiting_tool_calls(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> int:
        """How many tool calls the session's agent is parked on, as last
        stored: ``ASKING`` the user's confirmation or ``SUBMITTED`` for an
        external result.

        A parked agent takes only the answers to those calls (or an
        interrupt): :meth:`Agent._check_incoming_event` rejects a new
        message, so the chat endpoint refuses one (409) while this is not
        zero. A session or agent that cannot be found counts none here;
        the run reports it as before.

        Args:
            user_id (`str`):
                Authenticated caller's user ID.
            session_id (`str`):
                The session to look at.
            agent_id (`str`):
                The agent that owns the session.

        Returns:
            `int`:
                The number of awaiting tool calls.
        """
        session = await self._storage.get_session(
            user_id,
            agent_id,
            session_id,
        )
        if session is None or not session.state.context:
            return 0
        try:
            agent_record = await self._access.resolve_agent(
                user_id,
                agent_id,
            )
        except HTTPException:
            return 0
        return len(
            session.state.get_awaiting_tool_calls(agent_record.data.name),
        )

    async def _keep_message_while_parked(
        self,
        session_id: str,
        agent: Agent,
        input_msg: object,
    ) -> bool:
        """Queue a message that reaches a parked agent for its resume.

        The agent would reject it (it waits for an answer) and the run
        end in a setup error. Nobody waits for a refusal here: the message
        came from a channel (a ``message`` trigger), or the chat endpoint
        accepted it before a run elsewhere parked the agent. So it goes to
        the session's inbox as a hint, as the channel gateway does with a
        message that finds a reply in flight, and the resuming run's first
        reasoning step drains it.

        Args:
            session_id (`str`):
                The session being run.
            agent (`Agent`):
                The assembled agent, whose state is inspected.
            input_msg (`object`):
                The run's input; only ``Msg`` / ``list[Msg]`` are kept.

        Returns:
            `bool`:
                ``True`` when the message was kept and the run should end.
        """
        if not isinstance(input_msg, (Msg, list)):
            return False
        awaiting = agent.state.get_awaiting_tool_calls(agent.name)
        if not awaiting:
            return False
        msgs = [input_msg] if isinstance(input_msg, Msg) else input_msg
        for msg in msgs:
            await self._message_bus.queue_push(
                MessageBusKeys.inbox(session_id),
                HintBlock(
                    hint=[
                        block
                        for block in msg.get_content_blocks()
                        if block.type in ("text", "data")
                    ],
                    source=json.dumps(
                        {"label": "user", "sublabel": msg.name},
                        ensure_ascii=False,
                    ),
                ).model_dump(mode="json"),
            )
        logger.warning(
            "Session %s is parked on %d awaiting tool call(s): %d incoming "
            "message(s) kept in its inbox for when the agent resumes.",
            session_id,
            len(awaiting),
            len(msgs),
        )
        return True
'''

HELPERS_PATCH = _patch(
    "ChatService", "run", RUN_TAIL, HELPERS,
    "ChatService learns to count a session's awaiting calls and to keep a message for the resume",
)

# ── the chat route: 409 while parked ──────────────────────────────────

SPAWN = """\
    # ------------------------------------------------------------------
    # New user message(s) / None — spawn directly. The registry's
    # single-run-per-session rule is the desired double-submit guard.
    # ------------------------------------------------------------------
    try:
        chat_run_registry.spawn(
"""

REFUSE_THEN_SPAWN = """\
    # ------------------------------------------------------------------
    # A session parked on a tool call (the user's confirmation or an
    # external result) takes only the answer, or a stop: the agent would
    # reject a new message and the run end in a setup error. Refuse it
    # here, where the user hears of it.
    # ------------------------------------------------------------------
    if request.input is not None:
        awaiting = await chat_service.awaiting_tool_calls(
            user_id,
            request.session_id,
            request.agent_id,
        )
        if awaiting:
            raise HTTPException(
                status_code=status.HTTP_409_CONFLICT,
                detail=(
                    f"Session {request.session_id!r} is waiting for the "
                    f"answer to {awaiting} tool call(s); answer them (or "
                    f"stop the reply) before sending a new message."
                ),
            )

""" + SPAWN

ENDPOINT_PATCH = _patch(
    None, "chat", SPAWN, REFUSE_THEN_SPAWN,
    "the chat endpoint answers 409 to a message while the session is parked on a call",
    module="agentscope.app._router._chat",
)

# ── the run: keep what reaches a parked agent ─────────────────────────

SKIP = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
"""

SKIP_OR_KEEP = SKIP + """\
                if await self._keep_message_while_parked(
                    session_id,
                    agent,
                    input_msg,
                ):
                    return
"""

RUN_PATCH = _patch(
    "ChatService", "_run_impl", SKIP, SKIP_OR_KEEP,
    "a run that finds its agent parked keeps its message in the inbox for the resume",
)

#: The fix, in the order its patches are applied.
PATCHES: tuple[SourcePatch, ...] = (HELPERS_PATCH, ENDPOINT_PATCH, RUN_PATCH)


def unified_diff() -> str:
    """The three patches as one unified diff against the installed
    release, one section per file (the route first)."""
    # imported here: the diffs module imports this package
    from .diffs import combined_diff  # pylint: disable=import-outside-toplevel

    return combined_diff(PATCHES)

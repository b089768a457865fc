"""A message to a session parked on a pending call: refused, or kept.

The bug (every release 2.0.7–2.0.11, finding F2, property I8): while the
agent waits for the user's confirmation of a tool call (ASKING) or for an
external result (SUBMITTED), a new message reaches a fresh run, the agent
rejects it (``Agent._check_incoming_event``: it is waiting for an answer),
and the run ends with ``ReplyEnd(ERROR)`` typed "setup" ("The session could
not be prepared"). The message never reaches the agent's context. The chat
endpoint accepted it (409 only while a run of the session is in flight in
its own process); a channel's ``message`` trigger meets the same end.

What the endpoint promises, in agentscope's own words: the chat route's
module docstring and ``chat``'s ``Raises`` make its 409 the "double-submit
guard" for "a chat run for this session ... already in flight", with the
run registry's own reason ("already has an active chat run"); anything
else it accepts is "scheduled" and, as ``enqueue_run_trigger`` documents
the ``message`` kind, a user message waits out a busy session and is then
reasoned over "as a real user turn". A run holds its session while the
session lock is held (``ChatService.interrupt``'s "Running (lock held)",
the channel gateway's "reply already in flight").

The fix, in two places, one for each way in:

- **The chat endpoint refuses the message (409)** while the stored state
  is parked on a call and no run holds the session or is in flight in
  this process, as upstream PR #2779 proposes; the answer says what to do
  (answer the card, or stop the reply). ``ChatService.awaiting_tool_calls``
  reads the stored state, then the session lock: while a run holds it (a
  resume among them) it counts none, and the route goes on as released
  (the registry's own refusal). State first: a resume that starts in
  between is seen working (I19).
- **A run that finds its agent parked keeps the message for after the
  resume, as the user's**: it delivers it to the inbox through
  ``deliver_to_inbox`` (under the inbox lock), marked as kept; the run
  that resumes the agent takes it back out and queues it as the
  ``message`` trigger it was, which the dispatcher starts as a user turn
  once the resume is done (I20). Nobody waits there for a refusal (a
  channel; a message accepted before another process's run parked the
  agent), and a hint on the resumed reply would answer nobody. Until the
  resume it waits in the inbox, where a run without this fix still gives
  it to the agent rather than losing it.

The inbox has no peek, so a registry flag beside it says that something
was kept: a resume with nothing kept touches neither the inbox nor its
lock. Cost: per kept message, one inbox delivery and a flag write; per
resume, one registry read, and when something was kept, one drain of the
inbox (what was not kept goes back, in order, under the inbox lock) and a
trigger per kept message.

Three patches: ``ChatService`` gains three helpers (after ``run``), the
chat route calls the first, ``_run_impl`` the second where it drops a
parked wake-up; the parts call each other, so they apply whole or not at
all, and share one diff per release.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose source holds the code the three patches replace.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

#: The properties the fix makes hold there.
COVERS = ("I8", "I19", "I20")

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
        \"\"\"How many tool calls the session's agent is parked on, as last
        stored, while no run holds the session: ``ASKING`` the user's
        confirmation or ``SUBMITTED`` for an external result.

        A parked agent takes only the answers to those calls (or an
        interrupt): :meth:`Agent._check_incoming_event` rejects a new
        message, so the chat endpoint refuses one (409) while this is not
        zero. While a run holds the session lock it is zero: that run
        answers for the session (a resume keeps the stored state parked
        until it persists), and the endpoint answers as it does for any
        run in flight. The state is read before the lock, so a resume
        that takes the session in between is seen working. A session or
        agent that cannot be found counts none here; the run reports it
        as before.

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
        \"\"\"
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
        awaiting = session.state.get_awaiting_tool_calls(
            agent_record.data.name,
        )
        if not awaiting or await self._message_bus.is_locked(
            MessageBusKeys.session_lock(session_id),
        ):
            return 0
        return len(awaiting)

    async def _keep_message_while_parked(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
        agent: Agent,
        input_msg: object,
    ) -> bool:
        \"\"\"Keep a message that reaches a parked agent for after its
        resume; on the resume, hand what was kept back as user turns.

        The agent would reject a message (it waits for an answer) and the
        run end in a setup error. Nobody waits for a refusal here: the
        message came from a channel (a ``message`` trigger), or the chat
        endpoint accepted it before a run elsewhere parked the agent. So
        it is delivered to the session's inbox, marked as the user's, and
        the run ends. A run that resumes the agent (an answer, an external
        result, a stop) queues what was kept as ``message`` triggers
        (:meth:`_requeue_kept_messages`) before the agent reasons.

        Args:
            user_id (`str`):
                The owning user id.
            session_id (`str`):
                The session being run.
            agent_id (`str`):
                The agent that owns the session.
            agent (`Agent`):
                The assembled agent, whose state is inspected.
            input_msg (`object`):
                The run's input; ``Msg`` / ``list[Msg]`` are kept.

        Returns:
            `bool`:
                ``True`` when the message was kept and the run should end.
        \"\"\"
        if not agent.state.get_awaiting_tool_calls(agent.name):
            return False
        if not isinstance(input_msg, (Msg, list)):
            if input_msg is not None:
                await self._requeue_kept_messages(
                    user_id,
                    session_id,
                    agent_id,
                )
            return False
        msgs = [input_msg] if isinstance(input_msg, Msg) else input_msg
        for msg in msgs:
            await deliver_to_inbox(
                self._message_bus,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                payload=HintBlock(
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
        await self._message_bus.registry_set(
            MessageBusKeys.inbox(session_id) + ":kept",
            "kept",
            "1",
        )
        logger.info(
            "Session %s is parked on an awaiting tool call: %d incoming "
            "message(s) kept in its inbox until the agent resumes.",
            session_id,
            len(msgs),
        )
        return True

    async def _requeue_kept_messages(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> None:
        \"\"\"Queue the messages kept while the agent was parked as
        ``message`` triggers, from the run that resumes it.

        Taken out of the inbox before the agent reasons, so they do not
        reach the resumed reply as hints. The dispatcher holds each
        trigger while this run holds the session, then runs it as a user
        turn. The inbox is drained and the rest pushed back in order under
        the inbox lock, as :func:`has_pending_inbox_or_release` does; a
        registry flag set with the kept messages spares a resume with
        nothing kept the drain.

        Args:
            user_id (`str`):
                The owning user id.
            session_id (`str`):
                The session being resumed.
            agent_id (`str`):
                The agent that owns the session.
        \"\"\"
        inbox = MessageBusKeys.inbox(session_id)
        flag = inbox + ":kept"
        if await self._message_bus.registry_get(flag, "kept") is None:
            return
        kept: list[Msg] = []
        async with self._message_bus.acquire_lock(
            MessageBusKeys.inbox_lock(session_id),
            ttl_secs=MessageBusKeys.INBOX_LOCK_TTL_SECS,
        ):
            payloads: list[dict] = []
            while True:
                batch = await self._message_bus.queue_drain(
                    inbox,
                    max_count=100,
                )
                if not batch:
                    break
                payloads.extend(payload for _entry_id, payload in batch)
            for payload in payloads:
                hint = HintBlock.model_validate(payload)
                try:
                    source = json.loads(hint.source or "{}")
                except ValueError:
                    source = None
                if isinstance(source, dict) and source.get("label") == "user":
                    kept.append(
                        Msg(
                            name=source.get("sublabel") or "user",
                            content=hint.hint,
                            role="user",
                        ),
                    )
                else:
                    await self._message_bus.queue_push(inbox, payload)
            await self._message_bus.registry_del(flag, "kept")
        for msg in kept:
            await enqueue_run_trigger(
                self._message_bus,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                kind=MessageBusKeys.WAKEUP_KIND_MESSAGE,
                inputs=msg,
            )
        logger.info(
            "Session %s resumes: %d message(s) kept while it was parked "
            "queued as user turns.",
            session_id,
            len(kept),
        )
'''

HELPERS_PATCH = _patch(
    "ChatService", "run", RUN_TAIL, HELPERS,
    "ChatService learns to count a parked session's awaiting calls, to keep a message as the user's"
    " and to queue it as a user turn on the resume",
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
    # reject a new message. While no run holds the session or is in
    # flight here, refuse it, where the user hears of it; while one is (a
    # resume among them), the registry below answers as for any run.
    # ------------------------------------------------------------------
    if (
        request.input is not None
        and chat_run_registry.get(request.session_id) is None
    ):
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
    "the chat endpoint answers 409 to a message while the session is parked on a call and no run holds it",
    module="agentscope.app._router._chat",
)

# ── the run: keep what reaches a parked agent ─────────────────────────

SKIP = """\
                if self._skip_parked_wakeup(session_id, agent, input_msg):
                    return
"""

SKIP_OR_KEEP = SKIP + """\
                if await self._keep_message_while_parked(
                    user_id,
                    session_id,
                    agent_id,
                    agent,
                    input_msg,
                ):
                    return
"""

RUN_PATCH = _patch(
    "ChatService", "_run_impl", SKIP, SKIP_OR_KEEP,
    "a run that finds its agent parked keeps its message for the resume, which queues it as a user turn",
)

#: The fix, in the order its patches are applied.
PATCHES: tuple[SourcePatch, ...] = (HELPERS_PATCH, ENDPOINT_PATCH, RUN_PATCH)


def unified_diff() -> str:
    """The three patches as one unified diff against the installed
    release, one section per file (the route first)."""
    # imported here: the diffs module imports this package
    from .diffs import combined_diff  # pylint: disable=import-outside-toplevel

    return combined_diff(PATCHES)

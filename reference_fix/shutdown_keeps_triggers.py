'''Let a graceful shutdown hand back the triggers and answers it would
drop.

The bug F14 (every release 2.0.7–2.0.11; I7, I5): the app's lifespan exit
(every rolling upgrade) runs ``WakeupDispatcher.__aexit__``, which cancels
the dispatcher's loop and its backoff timers, then
``ChatRunRegistry.__aexit__``, which cancels every run. What the loop had
drained and not yet dispatched (the rest of its batch, or, over Redis, a
drain whose reply the cancel lost), what a timer held until its backoff ran
out, and the answer a resume run carried but had not applied yet (it was
waiting for its session lock, or reading its records) are gone: a
confirmation the user gave (HTTP 200) is never applied, the card still
shows after the restart, and a payload's ``wake`` leaves it waiting.

The fix, in two parts:

1. The dispatcher marks itself stopping before it cancels anything; a
   batch runs in a task of its own that a cancel of the loop does not cut
   short and that the stopping dispatcher waits for; a stopping batch
   dispatches nothing more and pushes what it drained back on the queue; a
   backoff timer cancelled by the stop queues its trigger at once.
2. The run registry cancels with the message ``"shutdown"``; a run such a
   cancel reaches with a user's answer (a confirmation, an external
   result) or stop on a parked card queues it again if storage still shows
   the calls it answers awaiting, that is, if the run never applied it.

Whichever process drains next (another node, or this one restarted)
dispatches them. Cost: one task per drain; on a stop, one ``queue_push`` per
trigger handed back and one ``publish``, and per answer a run had not
applied, one storage read and one trigger. A wake-up or a message a run
carried when the shutdown cancelled it is not handed back (a wake-up is
owed again by the next delivery; a message may already be stored).
'''
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

_COMMON = dict(
    name="shutdown-keeps-triggers",
    module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher",
    targets=TARGET_RELEASES,
    covers=("I7", "I16"),
    what="a graceful shutdown hands the triggers its dispatcher holds back to the queue",
)

RETRY_TASKS = """\
        self._retry_tasks: set[asyncio.Task] = set()
"""

RETRY_TASKS_AND_BATCHES = """\
        self._retry_tasks: set[asyncio.Task] = set()
        # Batches being dispatched, which a stop waits for; once stopping,
        # they hand what they drained back to the queue.
        self._batches: set[asyncio.Task] = set()
        self._stopping = False
"""

EXIT = '''\
        """Cancel the dispatcher loop and any pending retries."""
'''

EXIT_STOPPING = '''\
        """Cancel the dispatcher loop and any pending retries, handing
        back to the queue every trigger a batch or a retry still holds."""
        self._stopping = True
        await asyncio.gather(*self._batches, return_exceptions=True)
'''

DRAIN = """\
    async def _drain_and_dispatch(self) -> None:
"""

DRAIN_IN_A_BATCH = '''\
    async def _drain_and_dispatch(self) -> None:
        """Drain and dispatch one batch in a task of its own: a cancel of
        the loop (a shutdown) does not cut it short, and a stopping
        dispatcher waits for it."""
        if self._stopping:
            return
        batch = asyncio.create_task(self._dispatch_batch())
        self._batches.add(batch)
        batch.add_done_callback(self._batches.discard)
        await asyncio.shield(batch)

    async def _hand_back(self, entries: list[dict]) -> None:
        """Push drained trigger entries back on the queue and signal, for
        whichever process drains next.

        Args:
            entries (`list[dict]`):
                The queue entries, as drained.
        """
        for payload in entries:
            await self._bus.queue_push(MessageBusKeys.wakeup_queue(), payload)
        if entries:
            await self._bus.publish(MessageBusKeys.wakeup_signal(), {})

    async def _dispatch_batch(self) -> None:
'''

EACH = """\
        for payload in entries:
"""

EACH_UNLESS_STOPPING = """\
        for n, payload in enumerate(entries):
            if self._stopping:
                await self._hand_back(entries[n:])
                return
"""

RETRY_SLEEP = """\
                await asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)
"""

RETRY_SLEEP_UNLESS_STOPPING = """\
                try:
                    await asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)
                except asyncio.CancelledError:
                    # A stopping dispatcher cancels its timers: queue the
                    # trigger now rather than drop it.
                    if not self._stopping:
                        raise
"""

# ── 2. a run cancelled by a shutdown hands back the answer it carried ─

REGISTRY_CANCEL = """\
        for task in tasks:
            task.cancel()
"""

REGISTRY_CANCEL_SHUTDOWN = """\
        for task in tasks:
            # The message tells a run this is a shutdown, not a user's
            # stop nor a session delete.
            task.cancel("shutdown")
"""

RUN_FAILED = """\
        except Exception as e:
            logger.exception(
                "ChatService.run failed for user_id=%s session_id=%s "
"""

RUN_HANDS_BACK = """\
        except asyncio.CancelledError as exc:
            # A shutdown before the run applied the user's answer or stop
            # (it waited for the session lock, or read its records): queue
            # it again for the next process.
            if exc.args == ("shutdown",) and isinstance(
                input_msg,
                (
                    UserConfirmResultEvent,
                    ExternalExecutionResultEvent,
                    UserInterruptEvent,
                ),
            ):
                await asyncio.shield(
                    self._hand_back_answer(
                        user_id,
                        session_id,
                        agent_id,
                        input_msg,
                    ),
                )
            raise
""" + RUN_FAILED

RUN_TAIL = """\
                "agent_id=%s, error=%s",
                user_id,
                session_id,
                agent_id,
                str(e),
            )
"""

RUN_TAIL_AND_HELPER = RUN_TAIL + '''
    async def _hand_back_answer(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
        answer: (
            UserConfirmResultEvent
            | ExternalExecutionResultEvent
            | UserInterruptEvent
        ),
    ) -> None:
        """Queue ``answer`` again as a ``resume`` trigger if storage still
        shows a call it answers (a stop answers every call) awaiting: the
        run that carried it was cancelled by a shutdown before it applied
        it.

        Args:
            user_id (`str`):
                The owner user id.
            session_id (`str`):
                The run's session id.
            agent_id (`str`):
                The run's agent id.
            answer:
                What the user sent that the run carried: a
                ``UserConfirmResultEvent``, an
                ``ExternalExecutionResultEvent`` or a ``UserInterruptEvent``
                (a stop).
        """
        session = await self._storage.get_session(
            user_id,
            agent_id,
            session_id,
        )
        context = session.state.context if session is not None else []
        if not context or context[-1].role != "assistant":
            return
        awaiting = {
            call.id
            for call in context[-1].get_content_blocks("tool_call")
            if call.state in ("asking", "submitted")  # a ToolCallState
        }
        answered = {
            result.tool_call.id
            for result in getattr(answer, "confirm_results", [])
        } | {result.id for result in getattr(answer, "execution_results", [])}
        if awaiting & answered or (
            awaiting and isinstance(answer, UserInterruptEvent)
        ):
            await enqueue_run_trigger(
                self._message_bus,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                kind=MessageBusKeys.WAKEUP_KIND_RESUME,
                inputs=answer,
            )
'''

_RUNS = dict(_COMMON, module="agentscope.app._service._chat", cls="ChatService")

PATCHES = (
    SourcePatch(method="__init__", before=RETRY_TASKS, after=RETRY_TASKS_AND_BATCHES, **_COMMON),
    SourcePatch(method="__aexit__", before=EXIT, after=EXIT_STOPPING, **_COMMON),
    SourcePatch(
        method="_drain_and_dispatch", before=DRAIN, after=DRAIN_IN_A_BATCH,
        more=((EACH, EACH_UNLESS_STOPPING),), **_COMMON,
    ),
    SourcePatch(method="_schedule_retry", before=RETRY_SLEEP, after=RETRY_SLEEP_UNLESS_STOPPING, **_COMMON),
    SourcePatch(**{**_COMMON, "module": "agentscope.app._manager._chat_run_registry", "cls": "ChatRunRegistry"},
                method="__aexit__", before=REGISTRY_CANCEL, after=REGISTRY_CANCEL_SHUTDOWN),
    SourcePatch(method="run", before=RUN_FAILED, after=RUN_HANDS_BACK,
                more=((RUN_TAIL, RUN_TAIL_AND_HELPER),), **_RUNS),
)

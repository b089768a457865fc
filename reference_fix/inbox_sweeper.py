"""Wake what a crashed run left in its session's inbox (F5).

The bug (every release 2.0.7–2.0.11): a run registers as its session's
inbox consumer, and while it is registered ``deliver_to_inbox`` queues no
wake-up (the run drains at its turn tail). A trigger the wake-up
dispatcher drained is gone from the queue once its run is spawned. When
the run's process dies (an OOM kill, a redeploy), its session lock and
consumer registration expire with their leases (600 s), but nothing
re-delivers: what producers deferred to the dead run, and the payload the
popped trigger was for, wait in the inbox until an unrelated event for
that session (I11).

The fix: a watch list on the bus (one hash, ``agentscope:inbox:watch``,
session id to its user and agent) and a sweeper in the wake-up dispatcher.

- A run puts its session on the list when it starts
  (``ChatService.run``, before ``_run_impl``) and takes it off when it ends
  (its ``finally``); the dispatcher puts the session on the list before it
  spawns a run for a trigger it drained. Only a run whose process died
  leaves its session on the list.
- The sweeper runs while the list is not empty: every drain of the
  dispatcher arms it (on start, and on every signal; a run's start
  publishes one, so every process's sweeper arms). It reads the list at
  once and then every 30 s, and stops when the list is empty. For each
  session with no run in this process and no session lock, it takes the
  inbox lock and, if the session is still listed (another process' sweeper
  may have taken it), looks at the inbox (drain and put back, as
  ``has_pending_inbox_or_release`` does); if no consumer is registered it
  takes the session off the list and, once the inbox lock is released, if
  payloads wait, queues a wake-up for them, as a producer would.

Cost: per run, three bus operations (``HSET`` and ``PUBLISH`` at its
start, ``HDEL`` at its end) and one trigger-queue drain per process for
that signal; per dispatched trigger, one ``HSET``. Per sweep (30 s) while
any session is on the list: one ``HGETALL``, one ``EXISTS`` per listed
session not running in this process, and for a listed session whose lock
has expired (its run died) the inbox look (lock, ``HGET`` of the list
entry, drain, a push per payload, ``HGET`` of the registration, ``HDEL``,
unlock) and, when payloads wait, a trigger (``RPUSH``, ``PUBLISH``). No
operation while nothing runs.

Residual window (not reachable in one process): a sweeper in another
process may find a session listed, unlocked and with an empty inbox while
a new run of it sits between its start and its lock acquisition; it takes
the session off the list, and if that run then dies after producers
deferred to it, they wait. The watertight place for the listing is
``deliver_to_inbox`` (under the inbox lock, when it defers to a consumer);
this fix keeps to methods.
"""
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")
WATCH = "agentscope:inbox:watch"
SWEEP_SECS = 30.0
DISPATCHER = "agentscope.app._manager._wakeup_dispatcher"

DRAIN_START = '''\
        """Read up to a batch of trigger entries and dispatch each."""
        try:
            raw_entries = await self._bus.queue_drain(
'''

DRAIN_START_ARMED = '''\
        """Read up to a batch of trigger entries and dispatch each."""
        # Every drain (on start, on each signal) keeps the inbox sweeper
        # running while a session is watched.
        self._arm_inbox_sweeper()
        try:
            raw_entries = await self._bus.queue_drain(
'''

SPAWN = """\
        try:
            self._registry.spawn(
                self._chat_service.run(
                    user_id=user_id,
                    session_id=session_id,
                    agent_id=agent_id,
                    input_msg=input_msg,
                ),
                session_id=session_id,
                name=f"{kind}-run:{session_id}",
            )
        except RuntimeError:
            # A local run was registered between the running-check and
            # the spawn. Re-queue so neither the carried input nor a
            # queued inbox payload is stranded — that run may already be
            # past its last drain.
            self._schedule_retry(
                user_id,
                session_id,
                agent_id,
                kind,
                input_msg,
            )
"""

SWEEPER = f'''
    async def _watch_session(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> None:
        """Put the session on the inbox watch list (see
        :meth:`_sweep_inboxes`)."""
        import json  # pylint: disable=import-outside-toplevel

        try:
            await self._bus.registry_set(
                "{WATCH}",
                session_id,
                json.dumps({{"user_id": user_id, "agent_id": agent_id}}),
            )
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "WakeupDispatcher: could not watch session %s.",
                session_id,
            )
            return
        self._arm_inbox_sweeper()

    def _arm_inbox_sweeper(self) -> None:
        """Start the inbox sweeper unless it runs (then it reads the watch
        list once more before it may stop)."""
        self._inbox_sweep_due = True
        sweeper = getattr(self, "_inbox_sweeper", None)
        if sweeper is not None and not sweeper.done():
            return
        sweeper = asyncio.create_task(
            self._sweep_inboxes(),
            name="wakeup-sweeper",
        )
        self._inbox_sweeper = sweeper
        self._retry_tasks.add(sweeper)
        sweeper.add_done_callback(self._retry_tasks.discard)

    async def _sweep_inboxes(self) -> None:
        """While any session is on the watch list, look at each now and
        every {SWEEP_SECS:g} s: a run that died leaves its session listed,
        and what producers deferred to it waits in the inbox."""
        while True:
            self._inbox_sweep_due = False
            try:
                watched = await self._bus.registry_getall(
                    "{WATCH}",
                )
            except Exception:  # pylint: disable=broad-except
                logger.exception("WakeupDispatcher: inbox sweep failed.")
                watched = None
            if watched == {{}}:
                if self._inbox_sweep_due:
                    continue  # armed while it read: read again
                return  # nothing watched: the next drain re-arms
            for session_id, owner in sorted((watched or {{}}).items()):
                try:
                    await self._sweep_session(session_id, owner)
                except Exception:  # pylint: disable=broad-except
                    logger.exception(
                        "WakeupDispatcher: sweeping session %s failed.",
                        session_id,
                    )
            await asyncio.sleep({SWEEP_SECS})

    async def _sweep_session(self, session_id: str, owner: str) -> None:
        """Wake a watched session whose run is gone for what waits in its
        inbox, and stop watching it."""
        import json  # pylint: disable=import-outside-toplevel

        local = self._registry.get(session_id)
        if local is not None and not local.done():
            return  # its run is here: it drains, or hands back
        if await self._bus.is_locked(MessageBusKeys.session_lock(session_id)):
            return  # a run holds it (or a dead one, until its lease ends)
        inbox = MessageBusKeys.inbox(session_id)
        async with self._bus.acquire_lock(
            MessageBusKeys.inbox_lock(session_id),
            ttl_secs=MessageBusKeys.INBOX_LOCK_TTL_SECS,
        ):
            listed = await self._bus.registry_get(
                "{WATCH}",
                session_id,
            )
            if listed is None:
                return  # another process' sweeper took it meanwhile
            # No peek on the bus: drain and put back, in order, under the
            # inbox lock every producer holds too.
            queued: list[dict] = []
            while True:
                batch = await self._bus.queue_drain(inbox, max_count=100)
                if not batch:
                    break
                queued.extend(payload for _entry_id, payload in batch)
            for payload in queued:
                await self._bus.queue_push(inbox, payload)
            consumer = await self._bus.registry_get(
                MessageBusKeys.inbox_consumer(session_id),
                MessageBusKeys.INBOX_CONSUMER_FIELD,
            )
            if consumer is not None:
                return  # still registered: its lease has not run out
            # Taken off the list under the inbox lock (one sweeper wakes
            # it), and before the wake-up, so that the run it spawns
            # (which lists the session again) stays listed.
            await self._bus.registry_del("{WATCH}", session_id)
        if not queued:
            return
        ids = json.loads(owner)
        logger.warning(
            "WakeupDispatcher: session %s's run is gone and %d inbox "
            "payload(s) wait; waking it.",
            session_id,
            len(queued),
        )
        try:
            await enqueue_run_trigger(
                self._bus,
                user_id=ids["user_id"],
                session_id=session_id,
                agent_id=ids["agent_id"],
            )
        except Exception:
            await self._watch_session(
                ids["user_id"],
                session_id,
                ids["agent_id"],
            )
            raise
'''

SPAWN_WATCHED = (
    SPAWN
    + """\
        else:
            # The trigger has left the queue: watch the session until a
            # run of it ends (this one may die before it consumes).
            await self._watch_session(user_id, session_id, agent_id)
"""
    + SWEEPER
)

RUN_START = """\
        try:
            await self._run_impl("""

RUN_START_WATCHED = """\
        # Watched until it ends: if its process dies, the wake-up
        # dispatcher's sweeper wakes the session for what producers
        # deferred to it, once its leases have expired.
        await self._watch_inbox(user_id, session_id, agent_id)
        try:
            await self._run_impl("""

RUN_END = """\
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

RUN_END_UNWATCHED = RUN_END + f'''\
        finally:
            # Whatever the run leaves, ``_run_impl`` handed back.
            await self._unwatch_inbox(session_id)

    async def _watch_inbox(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> None:
        """Put the session on the inbox watch list and arm every
        process's sweeper (each wake-up dispatcher drains on the signal)."""
        try:
            await self._message_bus.registry_set(
                "{WATCH}",
                session_id,
                json.dumps({{"user_id": user_id, "agent_id": agent_id}}),
            )
            await self._message_bus.publish(MessageBusKeys.wakeup_signal(), {{}})
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "ChatService: could not watch session %s.",
                session_id,
            )

    async def _unwatch_inbox(self, session_id: str) -> None:
        """Take the session off the inbox watch list."""
        try:
            await self._message_bus.registry_del(
                "{WATCH}",
                session_id,
            )
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "ChatService: could not unwatch session %s.",
                session_id,
            )
'''


def _patch(name: str, module: str, cls: str, method: str, before: str, after: str, what: str) -> SourcePatch:
    return SourcePatch(
        name=name, module=module, cls=cls, method=method, before=before, after=after,
        targets=TARGET_RELEASES, covers=("I11",), what=what,
    )


PATCH = _patch(
    "inbox-sweeper", DISPATCHER, "WakeupDispatcher", "_dispatch_one", SPAWN, SPAWN_WATCHED,
    "a session whose run died is woken for its inbox once its leases expire",
)

#: Every patch of the fix, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = (
    PATCH,
    _patch(
        "inbox-sweeper-arm", DISPATCHER, "WakeupDispatcher", "_drain_and_dispatch",
        DRAIN_START, DRAIN_START_ARMED, "every drain arms the inbox sweeper",
    ),
    _patch(
        "inbox-sweeper-run-start", "agentscope.app._service._chat", "ChatService", "run",
        RUN_START, RUN_START_WATCHED, "a run puts its session on the inbox watch list",
    ),
    _patch(
        "inbox-sweeper-run-end", "agentscope.app._service._chat", "ChatService", "run",
        RUN_END, RUN_END_UNWATCHED, "a run that ends takes its session off the watch list",
    ),
)

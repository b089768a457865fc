"""Wake what a crashed run left in its session's inbox (F5).

The bug (every release 2.0.7–2.0.11): while a run is registered as its
session's inbox consumer, ``deliver_to_inbox`` queues no wake-up, and a
trigger the wake-up dispatcher drained is gone from the queue. When that
process dies (an OOM kill, a redeploy), the lock and registration expire
with their leases (600 s), but nothing re-delivers: what producers left
to it waits in the inbox until an unrelated event for that session (I11).

The fix: a watch list on the bus, one registry namespace any process
finds (``f"{MessageBusKeys.wakeup_queue()}:watch"``, derived as the
index-task signal's key is), and a sweeper in the wake-up dispatcher.
Each entry names one session, and is one of two kinds, so that no run's
end can take another's entry off:

- ``run:<id>``, one per run the dispatcher spawns for a trigger it
  drained (a fresh id from agentscope's id factory). The dispatcher lists
  it right after the spawn and takes it off when that run's task ends (a
  done callback on the task ``spawn`` returned); only a run whose process
  died (the dispatcher with it) leaves it.
- ``deferred:<session id>``, put by ``deliver_to_inbox`` for every
  payload it pushes, under the inbox lock and only if the session is not
  listed yet: whether it defers the payload to a registered consumer or
  queues a wake-up, the process that would consume it may die first (a
  dispatcher that drained the wake-up dies with it before any run is
  spawned). No run takes it off: the sweeper does, once it finds the
  session with no run and no consumer (then every payload has been
  drained, or waits for the wake-up it queues). A producer that lists a
  session with a registered consumer publishes the wake-up signal after
  releasing the inbox lock, so every process' sweeper looks (the run's own
  may die with it); a wake-up's own signal does that otherwise.

The sweeper runs while the list is not empty. Every drain of the
dispatcher arms it (on start, and on each signal), and so does a spawn.
It reads the list 30 s after it is armed and then every 30 s, and stops
when it reads it empty. It looks only at entries it read the time before
too: a run spawned just now, in any process, may not hold its lock yet,
and waking its session would queue a second trigger, retried every 0.1 s
while that lock stays held (a failed release, a crashed run's lease). For
each such session with no run here and no session lock, it takes the
inbox lock and, if it is still listed, looks at the inbox (drain and put
back); if no consumer is registered it takes the session's entries off
and, if payloads wait, queues a wake-up for them, as a producer would.
Left open: a run listed for 30 s that has not taken its lock yet.

Cost in bus operations, one process (``test_its_cost_in_bus_operations``
counts them in the harness's trace, with and without the fix):

- the dispatcher's start: one ``registry_getall`` (read empty 30 s on);
- a run the chat endpoint starts, nothing delivered to it: none;
- a run a trigger starts: two, ``registry_set`` and ``registry_del`` of
  its entry;
- a payload pushed (a wake-up queued, or deferred to a running run):
  eleven for the first since the sweeper last took the session off,
  besides the read of a sweeper already armed: the producer's
  ``registry_get`` and ``registry_set`` of the session's entry; two more
  ``registry_getall`` (the second look, the empty list); at the second
  look, the run having ended, the look that takes the entry off
  (``is_locked``, the inbox lock, ``registry_get`` of the entry, one
  drain, the registration's ``registry_get``, ``registry_del``, the
  release). Deferred, two more: the producer's ``publish``, and the drain
  of each process' dispatcher on that signal. Each further payload while
  the session is listed: one ``registry_get``. (Previous forms: two per
  wake-up, which left one a dispatcher drained and then died with
  unwatched; six per run);
- per sweep (every 30 s while anything is listed), per process: a
  ``registry_getall``, an ``is_locked`` per session listed at both reads
  not running here; for a free lock, the look above (a push per payload)
  and, if payloads wait with no consumer, a wake-up (push, ``publish``);
- a drain while the sweeper is stopped: a ``registry_getall``.
"""
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")
#: The watch list's key, as the patched code builds it, and as it reads.
WATCH_KEY = 'f"{MessageBusKeys.wakeup_queue()}:watch"'
WATCH = "agentscope:wakeups:watch"
SWEEP_SECS = 30.0
DISPATCHER = "agentscope.app._manager._wakeup_dispatcher"
BUS_OPS = "agentscope.app._bus_ops"

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

SWEEPER = '''
    async def _watch_run(
        self,
        user_id: str,
        session_id: str,
        agent_id: str,
    ) -> str | None:
        """Put the run just spawned on the inbox watch list (see
        :meth:`_sweep_inboxes`); returns its entry."""
        import json  # pylint: disable=import-outside-toplevel

        # pylint: disable-next=import-outside-toplevel
        from ..._utils._common import _generate_id

        field = f"run:{_generate_id()}"
        try:
            await self._bus.registry_set(
                WATCH_KEY,
                field,
                json.dumps(
                    {
                        "user_id": user_id,
                        "session_id": session_id,
                        "agent_id": agent_id,
                    },
                ),
            )
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "WakeupDispatcher: could not watch session %s.",
                session_id,
            )
            return None
        self._arm_inbox_sweeper()
        return field

    def _unwatch_at_end(
        self,
        session_id: str,
        field: str | None,
        run: asyncio.Task | None,
    ) -> None:
        """Take ``field`` off the watch list when ``run`` (the session's
        local run) ends: its own task, so a run whose process dies (the
        dispatcher with it) leaves the entry."""
        if field is None:
            return

        async def _unwatch() -> None:
            try:
                await self._bus.registry_del(
                    WATCH_KEY,
                    field,
                )
            except Exception:  # pylint: disable=broad-except
                logger.exception(
                    "WakeupDispatcher: could not unwatch session %s.",
                    session_id,
                )

        def _at_end(_run: object = None) -> None:
            task = asyncio.create_task(_unwatch(), name="wakeup-unwatch")
            self._unwatching.add(task)
            task.add_done_callback(self._unwatching.discard)

        self._unwatching = getattr(self, "_unwatching", set())
        if run is None:
            _at_end()
        else:
            run.add_done_callback(_at_end)

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
        """While anything is on the watch list, look every SWEEP_SECS s at
        each session listed at the previous look too: a run that died
        leaves its entry, and what producers deferred to it waits in the
        inbox. (A run spawned just now may not hold its lock yet.)"""
        import json  # pylint: disable=import-outside-toplevel

        seen: set[str] = set()
        while True:
            await asyncio.sleep(SWEEP_SECS)
            self._inbox_sweep_due = False
            try:
                watched = await self._bus.registry_getall(
                    WATCH_KEY,
                )
            except Exception:  # pylint: disable=broad-except
                logger.exception("WakeupDispatcher: inbox sweep failed.")
                watched = None
            if watched == {}:
                if self._inbox_sweep_due:
                    continue  # armed while it read: read again
                return  # nothing watched: the next drain re-arms
            old, seen = seen, set(watched or seen)
            sessions: dict[str, tuple[dict, list[str]]] = {}
            for field, entry in sorted((watched or {}).items()):
                if field not in old:
                    continue
                ids = json.loads(entry)
                sessions.setdefault(ids["session_id"], (ids, []))[1].append(
                    field,
                )
            for ids, fields in sessions.values():
                try:
                    await self._sweep_session(ids, fields)
                except Exception:  # pylint: disable=broad-except
                    logger.exception(
                        "WakeupDispatcher: sweeping session %s failed.",
                        ids["session_id"],
                    )

    async def _sweep_session(self, ids: dict, fields: list[str]) -> None:
        """Wake a watched session whose run is gone for what waits in its
        inbox, and take its entries off."""
        import json  # pylint: disable=import-outside-toplevel

        watch = WATCH_KEY
        session_id = ids["session_id"]
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
            listed = [
                field
                for field in fields
                if await self._bus.registry_get(watch, field) is not None
            ]
            if not listed:
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
            # Taken off under the inbox lock (one sweeper wakes it), and
            # before the wake-up: the run it spawns is listed afresh.
            for field in listed:
                await self._bus.registry_del(watch, field)
        if not queued:
            return
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
            await self._bus.registry_set(watch, listed[0], json.dumps(ids))
            raise
'''.replace("WATCH_KEY", WATCH_KEY).replace("SWEEP_SECS", f"{SWEEP_SECS:g}", 1).replace(
    "await asyncio.sleep(SWEEP_SECS)", f"await asyncio.sleep({SWEEP_SECS})",
)

SPAWN_WATCHED = (
    SPAWN.replace("            self._registry.spawn(", "            run = self._registry.spawn(", 1).replace(
        "        except RuntimeError:\n", "        except RuntimeError:\n            run = self._registry.get(session_id)\n", 1,
    )
    + """\
        # The trigger has left the queue: the run spawned for it (or the
        # local one the retry waits for) is watched until it ends, when
        # it takes the entry off (its process may die before it consumes).
        watched = await self._watch_run(user_id, session_id, agent_id)
        self._unwatch_at_end(session_id, watched, run)
"""
    + SWEEPER
)

DEFER = """\
        consumer = await bus.registry_get(
            MessageBusKeys.inbox_consumer(session_id),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
        )

    if consumer is None:
"""

DEFER_WATCHED = """\
        consumer = await bus.registry_get(
            MessageBusKeys.inbox_consumer(session_id),
            MessageBusKeys.INBOX_CONSUMER_FIELD,
        )
        # Left to the registered run, or to the run the wake-up below
        # starts. Should that process die first (the dispatcher that
        # drained the wake-up with it), the payload outlives the leases
        # with nothing to wake the session: the wake-up dispatcher's inbox
        # sweeper watches it until it finds the session with no run and
        # no consumer.
        watch = WATCH_KEY
        entry = f"deferred:{session_id}"
        newly_watched = await bus.registry_get(watch, entry) is None
        if newly_watched:
            import json  # pylint: disable=import-outside-toplevel

            await bus.registry_set(
                watch,
                entry,
                json.dumps(
                    {
                        "user_id": user_id,
                        "session_id": session_id,
                        "agent_id": agent_id,
                    },
                ),
            )

    if newly_watched and consumer is not None:
        # Every process' sweeper looks: the run's may die with it. (A
        # wake-up's signal does the same.)
        await bus.publish(MessageBusKeys.wakeup_signal(), {})
    if consumer is None:
""".replace("WATCH_KEY", WATCH_KEY)


def _patch(name: str, module: str, cls: str | None, method: str, before: str, after: str, what: str) -> SourcePatch:
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
        "inbox-sweeper-deferred", BUS_OPS, None, "deliver_to_inbox",
        DEFER, DEFER_WATCHED, "a payload deferred to a registered run puts its session on the watch list",
    ),
)

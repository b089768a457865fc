"""Subscribe again when a dispatcher's pub/sub subscription ends (F4b).

The bug (every release 2.0.7–2.0.11): ``WakeupDispatcher._loop`` and the
three loops of ``CancelDispatcher`` are each one ``async for`` over
``MessageBus.subscribe`` inside a ``try/except`` that logs "loop crashed"
and returns. ``RedisMessageBus.subscribe`` lets every error but a read
timeout out, and redis-py does not reconnect a pub/sub connection taken
from the bus's own ``ConnectionPool`` (its connections get no retries). So
a dropped connection (a failover, a network blip, ``CLIENT KILL TYPE
pubsub``) ends each loop for the life of the process: no later wake-up,
resume or channel message is dispatched (I13, and the payloads wait for
good), and no stop or cancel is served. The same ``try`` also ends the loop
when the code handling one message raises.

The fix: one helper, ``_serve_channel``, that each of the four loops now
calls with its channel and a handler for one message. It subscribes, hands
each message to the handler, and subscribes again whenever the
subscription ends or fails:

- a handler that raises is logged and the subscription goes on (upstream
  #2652, for #2651, does the same in the cancel dispatcher's loops);
- the backoff between subscriptions starts at :data:`BASE_DELAY` and
  doubles up to :data:`MAX_DELAY`; it goes back to the start only after a
  subscription that delivered a message or stayed up :data:`HEALTHY_AFTER`
  seconds. A connection that drops as soon as it subscribes (a flapping
  one) is so retried ever more slowly, not ten times a second; the log has
  one traceback per run of failures and a one-line warning per attempt;
- ``ready`` is set once the first subscription is live or has failed, so
  a bus that is down at start no longer keeps ``WakeupDispatcher.__aenter__``
  waiting for ever (the cancel loops already set it in ``finally``);
- signals published while no one was subscribed are lost, so once a new
  subscription of the wake-up dispatcher is live it drains its durable
  trigger queue once, as ``__aenter__`` does on start (in a task of its
  own, as ``__aenter__``'s drain runs beside the loop). A stop or cancel
  published meanwhile is not recovered: pub/sub keeps nothing, and nothing
  in agentscope queues them.

Cost: none while the connection holds (the handler is awaited inside a
``try``, no bus operation is added). After a drop: one ``SUBSCRIBE`` per
attempt, at most one per :data:`MAX_DELAY` seconds once the backoff is
grown, and, for the wake-up dispatcher, one queue drain per subscription
made again.

The helper is one text (:data:`SERVE_CHANNEL`), added as a method to each
of the two classes: a :class:`SourcePatch` changes and adds methods of a
class, not functions of a module, so the two modules each carry a copy
(upstream it would be one function both import). Four patches, one per
loop; ``PATCH`` is the wake-up dispatcher's. The cancel dispatcher's
session-cancel patch adds its ``_serve_channel``, which its task-cancel and
interrupt patches call: those two apply after it (:data:`CANCEL_PATCHES`
is in that order). The wake-up dispatcher's stacks with
``dispatcher-survival`` (that one changes ``_drain_and_dispatch``; this one
``_loop``), and each applies alone.
"""
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

#: The first backoff between two subscriptions, in seconds (the wake-up
#: dispatcher's ``_RESUME_RETRY_BACKOFF_SECS``).
BASE_DELAY = 0.1

#: The longest backoff between two subscriptions, in seconds.
MAX_DELAY = 5.0

#: Seconds a subscription must stay up, if it delivers nothing, for the
#: backoff to start again from :data:`BASE_DELAY` once it ends.
HEALTHY_AFTER = 30.0

WAKEUP_LOOP = """\
        try:
            async for _signal in self._bus.subscribe(
                MessageBusKeys.wakeup_signal(),
                on_ready=ready.set,
            ):
                await self._drain_and_dispatch()
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "WakeupDispatcher loop crashed; subscription ended.",
            )
"""

SESSION_CANCEL_LOOP = """\
        try:
            async for payload in self._bus.subscribe(
                MessageBusKeys.session_cancel_channel(),
                on_ready=ready.set,
            ):
                sid = payload.get("session_id")
                if isinstance(sid, str):
                    self._cancel_session(sid)
        except Exception:
            logger.exception(
                "CancelDispatcher session-cancel loop crashed.",
            )
        finally:
            # Unblock ``__aenter__`` even if subscribe failed before
            # ``on_ready`` ran, so startup cannot deadlock.
            ready.set()
"""

TASK_CANCEL_LOOP = """\
        try:
            async for payload in self._bus.subscribe(
                MessageBusKeys.task_cancel_channel(),
                on_ready=ready.set,
            ):
                task_id = payload.get("task_id")
                if not isinstance(task_id, str):
                    continue
                cancelled = self._bg_manager.cancel_task(task_id)
                if cancelled:
                    logger.info(
                        "CancelDispatcher: cancelled local BG task %s "
                        "via task-level broadcast.",
                        task_id,
                    )
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "CancelDispatcher task-cancel loop crashed.",
            )
        finally:
            # Unblock ``__aenter__`` even if subscribe failed before
            # ``on_ready`` ran, so startup cannot deadlock.
            ready.set()
"""

INTERRUPT_LOOP = """\
        try:
            async for payload in self._bus.subscribe(
                MessageBusKeys.session_interrupt_channel(),
                on_ready=ready.set,
            ):
                sid = payload.get("session_id")
                if isinstance(sid, str):
                    self._interrupt_session(sid)
        except Exception:  # pylint: disable=broad-except
            logger.exception(
                "CancelDispatcher interrupt loop crashed.",
            )
        finally:
            ready.set()
"""


WAKEUP_SERVED = """\
        await self._serve_channel(
            MessageBusKeys.wakeup_signal(),
            ready,
            lambda _signal: self._drain_and_dispatch(),
            "WakeupDispatcher",
            on_resubscribed=self._drain_missed_triggers,
        )
"""


def _served(handling: str, channel: str, label: str) -> str:
    """A cancel loop's new body: a handler doing ``handling`` with one
    message (``payload``), and the call of ``_serve_channel`` with it."""
    return (
        "\n        async def _handle(payload: dict) -> None:\n"
        + handling
        + f"""
        await self._serve_channel(
            MessageBusKeys.{channel}(),
            ready,
            _handle,
            "CancelDispatcher {label}",
        )
"""
    )


def _handling(loop: str) -> str:
    """The body of ``loop``'s ``async for`` (what it does with one message)
    as a handler's: four spaces less indented, ``continue`` a ``return``."""
    lines = loop.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "):") + 1
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("except Exception"))
    body = [line[4:] for line in lines[start:end]]
    body = [line.replace("continue", "return") if line.strip() == "continue" else line for line in body]
    return "".join(line + "\n" for line in body)


SESSION_CANCEL_SERVED = _served(_handling(SESSION_CANCEL_LOOP), "session_cancel_channel", "session-cancel")
TASK_CANCEL_SERVED = _served(_handling(TASK_CANCEL_LOOP), "task_cancel_channel", "task-cancel")
INTERRUPT_SERVED = _served(_handling(INTERRUPT_LOOP), "session_interrupt_channel", "interrupt")

#: The helper every loop calls: one text, a method of each class.
SERVE_CHANNEL = f'''
    async def _serve_channel(
        self,
        channel: str,
        ready: asyncio.Event,
        handle,
        name: str,
        on_resubscribed=None,
    ) -> None:
        """Hand each message published on ``channel`` to ``handle``, and
        subscribe again whenever the subscription ends or fails.

        A handler that raises is logged; the subscription goes on. A
        subscription that ends or fails (a dropped connection ends it:
        redis-py does not resubscribe on the bus's own pool) is made
        again after a backoff from {BASE_DELAY:g} s doubling up to {MAX_DELAY:g} s,
        which starts again from {BASE_DELAY:g} s only after a subscription
        that delivered a message or stayed up {HEALTHY_AFTER:g} s: a connection
        that drops as soon as it is made is retried ever more slowly.
        Messages published while no subscription is live are lost.

        Args:
            channel (`str`):
                The channel to subscribe to.
            ready (`asyncio.Event`):
                Set once the first subscription is live or has failed,
                so that start-up does not wait for a bus that is down.
            handle (`Callable[[dict], Awaitable[None]]`):
                Awaited with each message.
            name (`str`):
                What the log calls this subscription.
            on_resubscribed (`Callable[[], None] | None`, optional):
                Called when a subscription is live after ``ready`` was
                set: the messages published meanwhile were missed.
        """
        loop = asyncio.get_running_loop()
        live_since: float | None = None
        delay = {BASE_DELAY!r}
        failures = 0

        def _on_ready() -> None:
            nonlocal live_since
            live_since = loop.time()
            if ready.is_set() and on_resubscribed is not None:
                on_resubscribed()
            ready.set()

        while True:
            live_since = None
            delivered = False
            error: Exception | None = None
            try:
                async for payload in self._bus.subscribe(
                    channel,
                    on_ready=_on_ready,
                ):
                    delivered = True
                    try:
                        await handle(payload)
                    except Exception:  # pylint: disable=broad-except
                        logger.exception(
                            "%s: handling a message failed; the "
                            "subscription goes on.",
                            name,
                        )
            except Exception as failure:  # pylint: disable=broad-except
                error = failure
            ready.set()
            healthy = delivered or (
                live_since is not None and loop.time() - live_since >= {HEALTHY_AFTER!r}
            )
            if healthy:
                delay, failures = {BASE_DELAY!r}, 0
            failures += 1
            # One traceback per run of failures, then one line each.
            logger.warning(
                "%s subscription %s; resubscribing in %.1f s.",
                name,
                "ended" if error is None else f"failed: {{error!r}}",
                delay,
                exc_info=error if failures == 1 else None,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, {MAX_DELAY!r})
'''

DRAIN_MISSED = '''
    def _drain_missed_triggers(self) -> None:
        """Drain the trigger queue once, beside the loop (as ``__aenter__``
        does on start): signals published while the subscription was down
        were missed, but their triggers wait in the durable queue."""

        async def _catch_up() -> None:
            try:
                await self._drain_and_dispatch()
            except asyncio.CancelledError:
                pass
            except Exception:  # pylint: disable=broad-except
                logger.exception(
                    "WakeupDispatcher: draining after resubscribing failed.",
                )

        task = asyncio.create_task(
            _catch_up(),
            name="wakeup-dispatcher:catch-up",
        )
        self._retry_tasks.add(task)
        task.add_done_callback(self._retry_tasks.discard)
'''


def _loop_patch(name: str, module: str, cls: str, method: str, loop: str, served: str, what: str) -> SourcePatch:
    return SourcePatch(
        name=name,
        module=f"agentscope.app._manager.{module}",
        cls=cls,
        method=method,
        before=loop,
        after=served,
        targets=TARGET_RELEASES,
        covers=("I13",),
        what=what,
    )


PATCH = _loop_patch(
    "resubscribe", "_wakeup_dispatcher", "WakeupDispatcher", "_loop", WAKEUP_LOOP,
    WAKEUP_SERVED + SERVE_CHANNEL + DRAIN_MISSED,
    "the wake-up dispatcher subscribes again, with a growing backoff, when its subscription"
    " drops, then drains once",
)

CANCEL_PATCHES = tuple(
    _loop_patch(
        f"resubscribe-{channel}", "_cancel_dispatcher", "CancelDispatcher", method, loop, served,
        f"the cancel dispatcher's {channel} loop subscribes again, with a growing backoff, when its"
        " subscription drops",
    )
    for channel, method, loop, served in (
        ("session-cancel", "_session_cancel_loop", SESSION_CANCEL_LOOP, SESSION_CANCEL_SERVED + SERVE_CHANNEL),
        ("task-cancel", "_task_cancel_loop", TASK_CANCEL_LOOP, TASK_CANCEL_SERVED),
        ("interrupt", "_interrupt_loop", INTERRUPT_LOOP, INTERRUPT_SERVED),
    )
)

#: Every patch of the fix, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = (PATCH, *CANCEL_PATCHES)

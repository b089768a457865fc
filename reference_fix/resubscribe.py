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
good), and no stop or cancel is served.

The fix: each loop subscribes again when its subscription ends or fails,
after a backoff that starts at the dispatcher's (0.1 s) and doubles, up to
5 s, while the bus stays unreachable. Signals published while no one was
subscribed are lost, so once the wake-up dispatcher's new subscription is
live it drains its durable trigger queue once, as ``__aenter__`` does on
start (in a task of its own, as ``__aenter__``'s drain runs beside the
loop). A stop or cancel published meanwhile is not recovered: pub/sub
keeps nothing, and nothing in agentscope queues them.

Cost: none while the connection holds. After a drop: one ``SUBSCRIBE``
per attempt and, for the wake-up dispatcher, one queue drain.

Four patches, one per loop; ``PATCH`` is the wake-up dispatcher's. The
wake-up dispatcher's stacks with ``dispatcher-survival`` (that one changes
``_drain_and_dispatch``; this one ``_loop``), and each applies alone.
"""
from __future__ import annotations

import re

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

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

# The wake-up dispatcher drains once when a new subscription is live
# (signals sent while it was down were missed), in a task of its own.
CATCH_UP = """\
                if resubscribing:
                    self._drain_missed_triggers()
"""

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


def resubscribing(loop: str, base: str, catch_up: str = "") -> str:
    """``loop`` (one ``try``/``async for`` over ``subscribe``) run again
    whenever its subscription ends or fails, after a backoff from ``base``
    seconds doubling to 5 s while no subscription comes up; ``catch_up``:
    lines run (inside ``on_ready``) when a new subscription is live."""
    name = re.search(r'"([^"]*?) loop crashed', loop).group(1)
    body = loop.replace("on_ready=ready.set,", "on_ready=_on_ready,")
    body = re.sub(
        r'loop crashed[^"]*",',
        'subscription failed; "\n                "resubscribing.",',
        body,
    )
    lines = ["    " + line if line else line for line in body.splitlines()]
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("except Exception"))
    ended = [
        "                logger.warning(",
        f'                    "{name} subscription ended; "',
        '                    "resubscribing.",',
        "                )",
    ]
    head = [
        f"        delay = {base}",
        *(["        resubscribing = False"] if catch_up else []),
        "        while True:",
        "            live = asyncio.Event()",
        "",
        "            def _on_ready(live: asyncio.Event = live) -> None:",
        "                live.set()",
        "                ready.set()",
        *catch_up.splitlines(),
        "",
    ]
    tail = [
        "            # The subscription ended (a dropped connection ends it:",
        "            # redis-py does not resubscribe on the bus's own pool).",
        "            # Subscribe again, backing off while none comes up.",
        *(["            resubscribing = True"] if catch_up else []),
        "            delay = (",
        f"                {base} if live.is_set() else min(delay * 2, 5.0)",
        "            )",
        "            await asyncio.sleep(delay)",
    ]
    return "\n".join(head + lines[:end] + ended + lines[end:] + tail) + "\n"


def _loop_patch(name: str, module: str, cls: str, method: str, loop: str, what: str, **kw) -> SourcePatch:
    return SourcePatch(
        name=name,
        module=f"agentscope.app._manager.{module}",
        cls=cls,
        method=method,
        before=loop,
        after=resubscribing(loop, **kw),
        targets=TARGET_RELEASES,
        covers=("I13",),
        what=what,
    )


PATCH = _loop_patch(
    "resubscribe", "_wakeup_dispatcher", "WakeupDispatcher", "_loop", WAKEUP_LOOP,
    "the wake-up dispatcher subscribes again when its subscription drops, then drains once",
    base="_RESUME_RETRY_BACKOFF_SECS", catch_up=CATCH_UP,
)
# ``_drain_missed_triggers`` is added after ``_loop`` (the end of its source).
PATCH = SourcePatch(**{**PATCH.__dict__, "after": PATCH.after + DRAIN_MISSED})

CANCEL_PATCHES = tuple(
    _loop_patch(
        f"resubscribe-{channel}", "_cancel_dispatcher", "CancelDispatcher", method, loop,
        f"the cancel dispatcher's {channel} loop subscribes again when its subscription drops",
        base="0.1",
    )
    for channel, method, loop in (
        ("session-cancel", "_session_cancel_loop", SESSION_CANCEL_LOOP),
        ("task-cancel", "_task_cancel_loop", TASK_CANCEL_LOOP),
        ("interrupt", "_interrupt_loop", INTERRUPT_LOOP),
    )
)

#: Every patch of the fix, in the order they are applied.
PATCHES: tuple[SourcePatch, ...] = (PATCH, *CANCEL_PATCHES)

"""F17: while a session lock stays held, every trigger for that session is
re-queued ten times a second, each time waking every process.

What it shows: two wake-up dispatchers (two processes) share agentscope's
``InMemoryMessageBus``. Session ``stuck``'s lock is held and never
released: a run whose release failed, or whose process died, holds it
until its lease runs out (``SESSION_RUN_TTL_SECS``, 600 s). Three
triggers for ``stuck`` are queued meanwhile (two deliveries' wake-ups
and a channel's message), and a trigger for ``healthy`` a minute later.
Two minutes pass.

- agentscope as released (2.0.7–2.0.11): each trigger is re-queued every
  0.1 s (``_RESUME_RETRY_BACKOFF_SECS``), for as long as the lock is held;
  each re-queue publishes the wake-up signal and both dispatchers drain.
  About 150 bus operations a second, the same in the second minute as in
  the first, against the module's own comment that the delay is "long
  enough to avoid a hot re-enqueue loop while the lock is held" (upstream
  issue #2677).
- With the ``lock-held-backoff`` reference fix (``--with-fix``, which
  applies every reference fix for the installed release): the re-queues
  back off to one every 10 s per trigger; nothing is dropped; ``healthy``
  is dispatched at once.

Exit 1 when ``stuck``'s triggers still cost more than 10 bus operations a
second in the second minute; 0 when they cost fewer and ``healthy`` was
dispatched, with none of ``stuck``'s triggers dropped; 3 when the script
itself fails.

How: agentscope's own ``WakeupDispatcher``, ``InMemoryMessageBus`` and
``ChatRunRegistry``; a bus subclass that counts calls, a storage stub
(``get_session`` only) and a chat service stub that records the runs it
is asked for. The event loop's clock is virtual and jumps over waits, so
the two minutes take no wall time.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f17_lock_held_retries.py [--with-fix]
"""
from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

from agentscope import __version__ as VERSION
from agentscope.app._bus_ops import enqueue_run_trigger
from agentscope.app._manager._chat_run_registry import ChatRunRegistry
from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys
from agentscope.message import UserMsg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _clock import JumpingLoop, exit_with  # noqa: E402

MINUTES = 2
#: Bus operations a second, in the second minute, above which the
#: re-queues are a hot loop.
HOT = 10.0


class CountingBus(InMemoryMessageBus):
    """agentscope's in-memory bus, counting its calls per virtual minute."""

    counted = ("queue_push", "queue_drain", "publish", "is_locked")

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter = Counter()
        for name in self.counted:
            setattr(self, name, self._counting(name, getattr(self, name)))

    def _counting(self, name, call):
        async def counted(*args, **kwargs):
            minute = int(asyncio.get_running_loop().time() // 60)
            self.calls[minute] += 1
            return await call(*args, **kwargs)

        return counted


class Storage:
    async def get_session(self, user_id: str, agent_id: str, session_id: str) -> dict:
        return {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}


class ChatService:
    def __init__(self) -> None:
        self.runs: list[tuple[float, str]] = []

    async def run(self, *, user_id, session_id, agent_id, input_msg) -> None:  # pylint: disable=unused-argument
        self.runs.append((asyncio.get_running_loop().time(), session_id))


async def story(bus: CountingBus, chat: ChatService) -> int:
    """Returns how many retry timers and queue entries stuck's triggers
    have at the end (a timer that has just pushed its entry counts twice)."""
    storage = Storage()
    first = WakeupDispatcher(bus, storage, chat, ChatRunRegistry())
    second = WakeupDispatcher(bus, storage, chat, ChatRunRegistry())
    async with first, second:
        lock = bus.acquire_lock(MessageBusKeys.session_lock("stuck"), ttl_secs=MessageBusKeys.SESSION_RUN_TTL_SECS)
        await lock.__aenter__()  # never released: a failed release, a dead run
        for _ in range(2):
            await enqueue_run_trigger(bus, "user", "stuck", "agent")
        await enqueue_run_trigger(
            bus, "user", "stuck", "agent", kind=MessageBusKeys.WAKEUP_KIND_MESSAGE,
            inputs=UserMsg(name="user", content="the answer"),
        )
        await asyncio.sleep(60)
        await enqueue_run_trigger(bus, "user", "healthy", "agent")
        await asyncio.sleep(60 * (MINUTES - 1))
        timers = [t for d in (first, second) for t in d._retry_tasks if t.get_name().endswith(":stuck")]
        queued = [p for _, p in await bus.queue_drain(MessageBusKeys.wakeup_queue())]
        return len(timers) + sum(p["session_id"] == "stuck" for p in queued)


def main() -> int:
    applied = None
    if "--with-fix" in sys.argv[1:]:
        import reference_fix  # pylint: disable=import-outside-toplevel

        applied = reference_fix.apply()
    bus, chat = CountingBus(), ChatService()
    loop = JumpingLoop()
    try:
        held = loop.run_until_complete(story(bus, chat))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        if applied is not None:
            reference_fix.remove()
    per_second = [bus.calls[minute] / 60 for minute in range(MINUTES)]
    healthy = [t for t, sid in chat.runs if sid == "healthy"]
    print(f"agentscope {VERSION}{' with the reference fixes' if applied is not None else ''}")
    print("  stuck's lock held throughout; 3 triggers for it, 2 processes")
    for minute, rate in enumerate(per_second):
        print(f"  minute {minute + 1}: {rate:.1f} bus operations a second")
    print(f"  stuck dispatched: {sum(sid == 'stuck' for _, sid in chat.runs)} time(s);"
          f" healthy dispatched at {healthy[0] - 60 if healthy else None} s after its trigger")
    if not healthy:
        print("BUG: the healthy session's trigger was not dispatched.")
        return 1
    print(f"  stuck's retry timers and queued entries at the end: {held} (3 triggers)")
    if held < 3:
        print("BUG: a trigger behind the held lock was dropped.")
        return 1
    if per_second[-1] > HOT:
        print(f"BUG: the triggers behind the held lock are re-queued in a hot loop"
              f" ({per_second[-1]:.1f} bus operations a second in minute {MINUTES}).")
        return 1
    print("OK: the triggers behind the held lock back off; nothing was dropped.")
    return 0


if __name__ == "__main__":
    exit_with(main)

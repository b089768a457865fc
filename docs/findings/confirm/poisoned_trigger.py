"""A poisoned trigger: one session's dispatch fails every time.

What it shows: the storage under agentscope's ``WakeupDispatcher`` raises
from ``get_session`` for one session, ``poisoned``, every time it is asked
(a storage error that stays on one record), and works for every other
session. Two ``wake`` triggers are queued in one batch, ``poisoned``'s
first, ``healthy``'s behind it, and two minutes pass.

- agentscope as released (2.0.7–2.0.11): nothing catches the error, the
  dispatcher's loop ends ("WakeupDispatcher loop crashed; subscription
  ended.") and ``healthy``'s trigger, drained in the same batch, is lost.
- A fix that only catches the error and re-queues the trigger after the
  dispatcher's 0.1 s backoff keeps the loop alive but retries ``poisoned``
  for ever: about ten ``get_session`` calls a second, each retry
  publishing the wake-up signal to every process.
- With the ``dispatcher-survival`` reference fix (``--with-fix``, which
  applies every reference fix for the installed release): ``healthy`` is
  dispatched; ``poisoned`` is tried 10 times, 0.1 s after the first failure
  and doubling up to 10 s, then given up: an error names its kind, session
  and attempts, and the entry is on the dead-letter queue
  ``agentscope:wakeups:dead``.

Exit 1 when the loop ends or a retry is still running in the second
minute (the retries never stop); 0 when ``healthy`` is dispatched and
``poisoned`` is given up with its record.

How: agentscope's own ``WakeupDispatcher``, ``InMemoryMessageBus`` and
``ChatRunRegistry``; a storage stub (``get_session`` only) and a chat
service stub that records the runs it is asked for. The event loop's
clock is virtual and jumps over waits, so the two minutes take no wall
time.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/poisoned_trigger.py [--with-fix]
"""
from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from agentscope import __version__ as VERSION
from agentscope.app._bus_ops import enqueue_run_trigger
from agentscope.app._manager._chat_run_registry import ChatRunRegistry
from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _clock import JumpingLoop, exit_with  # noqa: E402

MINUTES = 2


class Storage:
    def __init__(self) -> None:
        self.asked: list[tuple[float, str]] = []

    async def get_session(self, user_id: str, agent_id: str, session_id: str) -> dict:
        self.asked.append((asyncio.get_running_loop().time(), session_id))
        if session_id == "poisoned":
            raise ConnectionError("storage error on poisoned's record")
        return {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}


class ChatService:
    def __init__(self) -> None:
        self.runs: list[str] = []

    async def run(self, *, user_id, session_id, agent_id, input_msg) -> None:  # pylint: disable=unused-argument
        self.runs.append(session_id)


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def story(storage: Storage, chat: ChatService) -> list[dict]:
    bus = InMemoryMessageBus()
    async with WakeupDispatcher(bus, storage, chat, ChatRunRegistry()):
        for session in ("poisoned", "healthy"):  # one batch: no yield between
            await enqueue_run_trigger(bus, "user", session, "agent")
        await asyncio.sleep(60 * MINUTES)
    return [p for _, p in await bus.queue_drain(MessageBusKeys.wakeup_queue() + ":dead")]


def main() -> int:
    applied = []
    if "--with-fix" in sys.argv[1:]:
        import reference_fix  # pylint: disable=import-outside-toplevel

        applied = reference_fix.apply()
    errors = Errors()
    as_logger = logging.getLogger("as")
    as_logger.addHandler(errors)
    storage, chat = Storage(), ChatService()
    loop = JumpingLoop()
    try:
        dead = loop.run_until_complete(story(storage, chat))
    finally:
        loop.close()
        as_logger.removeHandler(errors)
        if applied:
            reference_fix.remove()
    tries = [t for t, sid in storage.asked if sid == "poisoned"]
    last_minute = [t for t in tries if t >= 60 * (MINUTES - 1)]
    print(f"agentscope {VERSION}{' with the reference fixes' if applied else ''}")
    print(f"  poisoned: get_session asked {len(tries)} times in {MINUTES} minutes"
          f" ({len(last_minute)} in the last minute); the last at {tries[-1]:.1f} s")
    print(f"  healthy: dispatched {chat.runs.count('healthy')} time(s)")
    print(f"  dead letters: {[(d['session_id'], d.get('dispatch_attempts')) for d in dead]}")
    for message in errors.messages:
        print(f"  error logged: {message}")
    if "healthy" not in chat.runs:
        print("BUG: the poisoned trigger ended the dispatcher's loop; the healthy trigger behind it was lost.")
        return 1
    if last_minute:
        print("BUG: the poisoned trigger is retried without end.")
        return 1
    if not dead or not any("poisoned" in m for m in errors.messages):
        print("BUG: the poisoned trigger stopped being retried, with no record of it.")
        return 1
    print("OK: the healthy trigger was dispatched; the poisoned one was retried a bounded number of times"
          " with growing delays, then given up with its record.")
    return 0


if __name__ == "__main__":
    exit_with(main)

"""F4: one failed bus call ends the wake-up dispatcher for good.

What it shows: two idle sessions each get a message in their inbox (a
team member writes to ``leader``, a channel to ``solo``); each delivery
queues a ``wake`` trigger. The wake-up dispatcher drains both in one
batch. Its ``is_locked`` check on leader's session lock raises
``ConnectionError`` (a dropped Redis connection). Nothing between
``_dispatch_one`` and ``_loop`` catches it: the loop logs "WakeupDispatcher
loop crashed; subscription ended." and exits. Solo's trigger, drained in
the same batch, is gone too; and from then on nothing this process is
sent is dispatched: a later delivery queues a wake-up nobody reads, and
every payload waits forever.

A first delivery, before the fault, shows the same path working.

Releases: every release from 2.0.7 to 2.0.11 (exit 1 on each);
``app/_manager/_wakeup_dispatcher.py`` is byte-identical across them.

How the window is hit: by construction, with a subclass of
``InMemoryMessageBus`` that raises ``ConnectionError`` from the next
``is_locked`` on one key, once, and otherwise passes every call through.
That is what redis-py raises when the connection drops during the call
(failover, network blip, server restart); the other dispatcher paths
(``queue_drain``, the retry timer) already catch it. The order of the
rest is the natural one: the two deliveries do not yield between them on
the in-memory bus, so the dispatcher drains both triggers at once.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f4_dispatcher_dies.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, hint, in_memory_peek, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402


class FlakyBus(InMemoryMessageBus):
    """agentscope's in-memory bus whose next ``is_locked`` on
    ``fail_key`` raises, once."""

    fail_key: str | None = None

    async def is_locked(self, key: str) -> bool:
        if key == self.fail_key:
            self.fail_key = None
            raise ConnectionError("Connection closed by server.")
        return await super().is_locked(key)


async def main() -> int:
    bus = FlakyBus()
    async with app_on(bus) as app:
        leader = await app.add_agent("leader")
        leader_session = await app.add_session(leader, "leader")
        solo = await app.add_agent("solo")
        solo_session = await app.add_session(solo, "solo")

        def queued(session: str) -> int:
            return len(in_memory_peek(bus, MessageBusKeys.inbox(session)))

        def report(when: str) -> None:
            say(
                f"{when}: dispatcher alive: {not app.dispatcher._task.done()}; "
                f"queued in leader's inbox: {queued(leader_session)}, "
                f"solo's: {queued(solo_session)}; wake-ups queued unread: "
                f"{len(in_memory_peek(bus, MessageBusKeys.wakeup_queue()))}",
            )

        await app.deliver(leader, leader_session, hint("first note", "team member"))
        await app.settle()
        report("a delivery before any fault")

        bus.fail_key = MessageBusKeys.session_lock(leader_session)
        await app.deliver(leader, leader_session, hint("second note", "team member"))
        await app.deliver(solo, solo_session, hint("a channel message", "channel"))
        await app.settle()
        report("is_locked failed once while the dispatcher drained both")

        await app.deliver(solo, solo_session, hint("another channel message", "channel"))
        await asyncio.sleep(2.0)
        await app.settle()
        report("a later delivery, 2 s on")

        dead = app.dispatcher._task.done()
        stranded = queued(leader_session) + queued(solo_session)
        if dead and stranded:
            say(
                f"CONFIRMED on agentscope {VERSION}: one failed is_locked ended the "
                f"wake-up dispatcher; {stranded} payload(s) wait with no run to come",
            )
            return 1
        say(f"not reproduced on agentscope {VERSION}")
        return 0


if __name__ == "__main__":
    run_script(main)

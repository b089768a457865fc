"""F12: before 2.0.7, a payload that lands while a run finishes its turn
waits until some unrelated run comes along.

What it shows: the user messages ``solo``; its model answers with text (no
tool call). While the model is answering, a team member hands a message to
``solo`` exactly as every producer of 2.0.3-2.0.6 does (``TeamSay``,
``AgentCreate``, ``AgentInvite``, the background tool's deliverer, the
scheduler; ``_app.App.deliver`` writes their two calls out): it pushes the
payload onto ``MessageBusKeys.inbox(session)`` and then calls
``enqueue_run_trigger`` (a ``wake`` trigger), whatever the session is
doing. The wake-up dispatcher drains the trigger, finds the
session lock held (the run is still answering) and drops it: a ``wake``
for a running session is left to the live run, which "drains the inbox
itself". But the run's ``InboxMiddleware`` drained the inbox before the
model call, and a text answer ends the reply with no further reasoning
step, so the run never looks again. It stores its state and releases the
lock. A: once everything has settled, the payload is still queued, it is
not in the stored context, and no run or trigger is left to take it. B:
only the next, unrelated user message picks it up.

Releases: 2.0.3 to 2.0.6 (the consumer registration of 2.0.7, PR #2295,
closes this window: a run registered as the inbox consumer checks its
inbox again at its turn tail). On 2.0.7 and later the script's delivery
would not be what agentscope's producers do (they call
``deliver_to_inbox``), so it refuses to run there (exit 2).

How the window is hit: by the natural order of a deployment's events, no
hook in the bus, as in F1. The team member waits for ``MODEL_CALL_START``
on the session's event stream and delivers; the scripted model answers once
the delivery and the dispatcher's drop are done, as a real model, whose
answer takes seconds, answers after a message that came in meanwhile. The
bus is agentscope's own ``InMemoryMessageBus``.

Exit codes: 1 if, in A, the payload is left queued and out of the context
with no run alive (confirmed); 0 if it reached the context; 2 on 2.0.7 or
later.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f12_lost_wakeup_before_2_0_7.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, hint, in_memory_peek, run_script, say  # noqa: E402
from agentscope.app import _bus_ops  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import Text  # noqa: E402

MARK = "status update from a teammate"


async def main() -> int:
    if hasattr(_bus_ops, "deliver_to_inbox"):
        say(f"agentscope {VERSION} has deliver_to_inbox: its producers do not push "
            "and wake like this; nothing to confirm here")
        return 2
    async with app_on(InMemoryMessageBus()) as app:
        agent = await app.add_agent("solo")
        session = await app.add_session(agent, "solo")
        ui = await app.tap(session)
        inbox = MessageBusKeys.inbox(session)
        app.script("solo").add(Text("here is my answer"))

        delivered = asyncio.Event()

        async def team_member() -> None:
            await ui.wait_for("MODEL_CALL_START")
            await app.deliver(agent, session, hint(MARK, "team"))  # push, then wake
            say("team member pushed a message and queued a wake-up while the model was answering")
            delivered.set()

        async def model_answers_after(_script: str) -> None:
            await delivered.wait()
            await asyncio.sleep(0.2)  # the dispatcher reads the trigger meanwhile

        app.book.while_answering = model_answers_after
        member = asyncio.create_task(team_member())
        status = await app.post_chat(agent, session, "hello")
        say(f"user posts to solo: HTTP {status}")
        await member
        await app.settle()

        queued = [str(p.get("hint")) for p in in_memory_peek(app.bus, inbox)]
        stored = MARK in await app.context_texts(agent, session)
        triggers = in_memory_peek(app.bus, MessageBusKeys.wakeup_queue())
        say(f"A: reply ends: {[e.get('finished_reason') for e in ui.reply_ends()]}")
        say(f"A: settled; run alive: {app.run_task(session) is not None}, "
            f"triggers queued: {len(triggers)}")
        say(f"A: the message is in the stored context: {stored}; still queued: {queued}")
        stranded = not stored and any(MARK in q for q in queued) and app.run_task(session) is None

        app.script("solo").add(Text("answered the second message"))
        status = await app.post_chat(agent, session, "anything new?")
        await app.settle()
        later = MARK in await app.context_texts(agent, session)
        say(f"B: the user's next message (HTTP {status}); now in the stored context: {later}")

        if stranded:
            say(f"CONFIRMED on agentscope {VERSION}: the wake-up was dropped while the run "
                "held the session and the run never drained again; the message waited "
                "for the next unrelated run")
            return 1
        say(f"not reproduced on agentscope {VERSION}: the message reached the context")
        return 0


if __name__ == "__main__":
    run_script(main)

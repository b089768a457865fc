"""F1: a parked agent fails its run when a payload reaches its inbox.

What it shows: the user messages a session; its model answers with a call
to ``GatedAction``, which needs the user's confirmation (ASKING,
``REQUIRE_USER_CONFIRM``). While the model was answering, a team member
delivered a message into the session's inbox. The run parks, finds the
payload at its turn tail (``has_pending_inbox_or_release``), goes around
its loop with no input, and ``Agent._check_incoming_event`` rejects that:
the UI gets a second ``REPLY_START`` and a ``REPLY_END(ERROR)`` ("The
session could not be prepared") although nothing failed. The parked state
itself stays intact (``awaiting_permission``).

Releases: present in 2.0.7 and 2.0.8 (exit 1). Fixed in 2.0.9, whose
continuation loop breaks out when the agent is parked (exit 0 on 2.0.9,
2.0.10 and 2.0.11).

How the window is hit: by the natural order of a deployment's events, no
hook in the bus. ``InboxMiddleware`` drains the inbox at the start of each
reasoning step, *before* the model call; the run stays registered as the
inbox consumer for the whole run, so a payload delivered while the model
is answering is queued without a wake-up and is this run's to handle at
its turn tail. The team member below waits for ``MODEL_CALL_START`` on
the session's event stream (as any subscriber can) and delivers; the
scripted model answers once the delivery is done, as a real model, whose
answer takes seconds, answers after a message that came in meanwhile. The
bus is agentscope's own ``InMemoryMessageBus``.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f1_parked_continuation_error.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, describe, hint, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus  # noqa: E402

from fakes.model import CallTool  # noqa: E402


async def main() -> int:
    async with app_on(InMemoryMessageBus()) as app:
        agent = await app.add_agent("leader")
        session = await app.add_session(agent, "leader")
        ui = await app.tap(session)
        app.script("leader").add(CallTool("GatedAction", {"note": "deploy"}))

        delivered = asyncio.Event()

        async def team_member() -> None:
            await ui.wait_for("MODEL_CALL_START")
            await app.deliver(agent, session, hint("status update from a teammate", "team member"))
            say("team member delivered a message while the model was answering")
            delivered.set()

        async def model_answers_after(_script: str) -> None:
            await delivered.wait()

        app.book.while_answering = model_answers_after
        member = asyncio.create_task(team_member())

        status = await app.post_chat(agent, session, "please deploy")
        say(f"user posts to the session: HTTP {status}")
        await member
        await app.settle()

        say("events the UI received:")
        for event in ui.events:
            say(f"  {describe(event)}")
        parked = await app.parked_status(agent, session)
        say(f"session is now: {parked}")

        errors = [e for e in ui.reply_ends() if e.get("finished_reason") == "error"]
        if errors:
            say(
                f"CONFIRMED on agentscope {VERSION}: {len(errors)} REPLY_END(ERROR) "
                "although nothing failed (the parked run re-entered its loop "
                "with no input)",
            )
            return 1
        say(f"not reproduced on agentscope {VERSION}: no REPLY_END(ERROR)")
        return 0


if __name__ == "__main__":
    run_script(main)

"""F2: a message sent while the agent is parked is accepted, then dropped
with an error.

What it shows: a session's model calls ``GatedAction`` and the run parks
on the user's confirmation (``awaiting_permission``) and ends. The user
then types a new message, as a chat UI (or a Slack / DingTalk channel)
lets them while the confirmation card is open:

- through the chat endpoint: HTTP 200, a run is spawned, the agent
  rejects a plain message while a call awaits confirmation, and the run
  publishes ``REPLY_END(ERROR)`` typed "setup" ("The session could not be
  prepared");
- from a channel (the gateway queues a ``message`` trigger): the same.

Neither message reaches the agent's context, neither is queued for after
the resume: when the user then confirms, the agent goes on without them.

Releases: every release from 2.0.7 to 2.0.11 (exit 1 on each), and 2.0.5
and 2.0.6 (exit 1; 2.0.5 has no ``message`` trigger, so only the chat
endpoint's message is sent there).

How the window is hit: there is no window. The steps are sequential, each
one after the previous has fully settled, on agentscope's own
``InMemoryMessageBus``; nothing is held or injected.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f2_message_while_parked.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, describe, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ConfirmResult, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

ENDPOINT_TEXT = "also, use the staging database"
CHANNEL_TEXT = "and tell me when it is done"


async def main() -> int:
    async with app_on(InMemoryMessageBus()) as app:
        agent = await app.add_agent("leader")
        session = await app.add_session(agent, "leader")
        ui = await app.tap(session)
        app.script("leader").add(CallTool("GatedAction", {"note": "deploy"}), Text("deployed"))

        await app.post_chat(agent, session, "please deploy")
        await app.settle()
        ask = await ui.wait_for("REQUIRE_USER_CONFIRM")
        say(f"session parked on a confirmation: {await app.parked_status(agent, session)}")

        seen = len(ui.events)
        status = await app.post_chat(agent, session, ENDPOINT_TEXT)
        await app.settle()
        say(f"user types a message in the chat: HTTP {status}")
        after_endpoint = ui.events[seen:]
        for event in after_endpoint:
            say(f"  {describe(event)}")

        sent = [ENDPOINT_TEXT]
        if hasattr(MessageBusKeys, "WAKEUP_KIND_MESSAGE"):
            seen = len(ui.events)
            await app.queue_message(agent, session, CHANNEL_TEXT)
            await app.settle()
            say("user writes from a channel (message trigger queued):")
            for event in ui.events[seen:]:
                say(f"  {describe(event)}")
            sent.append(CHANNEL_TEXT)
        else:
            say(f"no channel message: agentscope {VERSION} has no 'message' trigger (2.0.6 on)")

        say(f"session is now: {await app.parked_status(agent, session)}")
        answer = UserConfirmResultEvent(
            reply_id=ask["reply_id"],
            confirm_results=[
                ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call))
                for call in ask["tool_calls"]
            ],
        )
        await app.post_chat_event(agent, session, answer)
        await app.settle()
        say(f"user confirms; session is now: {await app.parked_status(agent, session)}")

        context = await app.context_texts(agent, session)
        assert "please deploy" in context  # the reader does see user messages
        lost = [t for t in sent if t not in context]
        errors = [
            e
            for e in ui.reply_ends()
            if e.get("finished_reason") == "error"
        ]
        say(f"messages missing from the agent's context after the resume: {lost}")
        say(f"REPLY_END(ERROR) published: {len(errors)}")
        if status == 200 and lost:
            say(
                f"CONFIRMED on agentscope {VERSION}: a message sent while parked "
                "was accepted and never reached the agent",
            )
            return 1
        say(f"not reproduced on agentscope {VERSION}")
        return 0


if __name__ == "__main__":
    run_script(main)

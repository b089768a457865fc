"""F6: stopping a reply leaves its slow tool running, and drops its result.

What it shows: the user messages a session; its model calls
``BackgroundJob``, an allowed tool that takes a while (here until the
script lets it finish, about 1.5 s). ``ToolOffloadMiddleware`` (installed
by ``ChatService`` on every run) runs the tool in a task of its own and
waits up to 10 s for it before moving it to the background. The user
presses stop 0.5 s in. The cancel lands in that wait and propagates: the
reply ends ``INTERRUPTED`` and the call's recorded result says it was
interrupted. But the tool's task is neither cancelled nor registered with
the ``BackgroundTaskManager``: it runs on, unowned (``ToolStop`` cannot
reach it), and when it finishes its result goes nowhere: not into the
agent's context, not into the inbox, no wake-up.

Releases: every release from 2.0.7 to 2.0.11 (exit 1 on each);
``app/middleware/_tool_offload_middleware.py`` is byte-identical across
them.

How the window is hit: by the natural order of events, no hook in the
bus. The window is the offload middleware's first 10 seconds of any tool
that is not instant (a shell command, a fetch, a build), and the user
presses stop inside it, as the stop button invites while a tool spinner
shows. Plain ``InMemoryMessageBus``; the tool is the harness's
``BackgroundJob`` (``fakes/tool_desk.py``), which records whether it was
stopped or finished.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f6_stop_orphans_tool.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, describe, in_memory_peek, run_script, say  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402
from fakes.tool_desk import job_output  # noqa: E402

NOTE = "nightly build"


async def main() -> int:
    bus = InMemoryMessageBus()
    async with app_on(bus) as app:
        agent = await app.add_agent("leader")
        session = await app.add_session(agent, "leader")
        ui = await app.tap(session)
        app.script("leader").add(CallTool("BackgroundJob", {"note": NOTE}), Text("ok"))

        await app.post_chat(agent, session, "run the nightly build")
        await ui.wait_for("TOOL_CALL_END")
        await asyncio.sleep(0.5)
        status = await app.press_stop(agent, session)
        await app.settle()
        say(f"user pressed stop 0.5 s into the tool: HTTP {status}")
        say(f"  reply ended: {[describe(e) for e in ui.reply_ends()]}")
        running = [e.kind for e in app.desk.events if e.kind in ("run", "stopped", "finished")]
        say(f"  the tool so far: {running}; registered background tasks: {len(app.background_tasks.tasks)}")
        results = [
            str(block.output)[:60]
            for msg in await app.context(agent, session)
            for block in msg.get_content_blocks("tool_result")
        ]
        say(f"  the call's result in the agent's context: {results}")

        await asyncio.sleep(1.0)
        app.desk.finish_job(NOTE)
        await asyncio.sleep(0.5)
        await app.settle()
        ended = [e.kind for e in app.desk.events if e.kind in ("stopped", "finished")]
        say(f"the tool, 1 s later: {ended}")
        output = job_output(NOTE)
        in_context = output in await app.context_texts(agent, session)
        in_inbox = any(
            output in str(p) for p in in_memory_peek(bus, MessageBusKeys.inbox(session))
        )
        say(f"  its result in the agent's context: {in_context}; in the inbox: {in_inbox}")
        say(f"  events after the reply ended: {ui.types()[ui.types().index('REPLY_END') + 1:]}")

        if "finished" in ended and not (in_context or in_inbox):
            say(
                f"CONFIRMED on agentscope {VERSION}: the stopped reply's tool ran on "
                "to the end and its result reached no one",
            )
            return 1
        say(f"not reproduced on agentscope {VERSION}")
        return 0


if __name__ == "__main__":
    run_script(main)

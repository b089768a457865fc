"""F2b: with the first version of F2's fix, the chat endpoint refuses a
message during a resume for the wrong reason.

What it shows: a session's model calls ``GatedAction`` and the run parks
on the user's confirmation. The user confirms (200); the wake-up
dispatcher starts the resume run, which takes the session lock, runs the
confirmed call and asks the model for its next turn. Its model is still
answering (a run in flight) when the user sends a new message:

- with the first version of ``message-while-parked`` (the fix's text at
  commit ``3712c33``, read from the repository's history and applied
  alone), the endpoint answers 409 "Session ... is waiting for the answer
  to 1 tool call(s); answer them (or stop the reply) ...", although the
  call was answered. It read the stored state, which stays parked until
  the resume run persists at its end;
- with the reference fixes (``--with-fix``), the endpoint answers with the
  run registry's refusal of a run in flight ("Session ... already has an
  active chat run in this process."), what agentscope says to any message
  sent while a run works; "waiting for the answer" only while the session
  is parked with no run holding it (checked before the answer).

Exit 1 when a 409 during the resume says the session waits for the
answer; 0 when it does not; 3 when the script cannot run (the previous
version of the fix not in the history, no ``git``, the fix refused, or a
step that did not happen).

Releases: every release the fix targets, 2.0.7 to 2.0.11 (exit 1 without
``--with-fix``, 0 with it).

How the window is hit: the scripted model holds its answer in the resume
run (``ScriptBook.while_answering``) until the message has been answered;
nothing else is held. On agentscope's own ``InMemoryMessageBus``.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f2b_wrong_refusal_during_resume.py [--with-fix]
"""
from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, app_on, say  # noqa: E402
from agentscope.app._router._schema import ChatRequest  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus  # noqa: E402
from agentscope.event import ConfirmResult, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock, UserMsg  # noqa: E402
from fastapi import HTTPException  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402
from harness.world.surface import chat_endpoint  # noqa: E402

#: The last commit with the first version of the fix.
PREVIOUS = "3712c33"
FIX_PATH = "reference_fix/message_while_parked.py"
WAITING = "is waiting for the answer to"
REPO = Path(__file__).resolve().parents[3]


class CannotRun(RuntimeError):
    """The script's own failure (exit 3)."""


def apply_previous_fix() -> None:
    """Apply the fix's text at :data:`PREVIOUS`, alone."""
    try:
        text = subprocess.run(
            ["git", "show", f"{PREVIOUS}:{FIX_PATH}"],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as missing:
        raise CannotRun(f"the previous version of the fix is not readable: {missing}") from missing
    import reference_fix  # the package its relative imports need

    spec = importlib.util.spec_from_loader("reference_fix._previous_message_while_parked", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = reference_fix.__name__
    exec(compile(text, f"{PREVIOUS}:{FIX_PATH}", "exec"), module.__dict__)  # noqa: S102
    try:
        for patch in module.PATCHES:
            patch.apply()
    except reference_fix.FixRefused as refused:
        raise CannotRun(f"the previous version of the fix refuses agentscope {VERSION}: {refused}") from refused
    say(f"the previous version of message-while-parked ({PREVIOUS}) applied alone")


async def post(app, agent_id: str, session_id: str, payload) -> tuple[int, str]:
    """POST /chat/ through agentscope's route: the status and a refusal's
    reason."""
    deps = dict(user_id=app.user_id, chat_service=app.chat_service, chat_run_registry=app.registry,
                message_bus=app.bus)
    try:
        await chat_endpoint(ChatRequest(agent_id=agent_id, session_id=session_id, input=payload), **deps)
    except HTTPException as refused:
        return refused.status_code, str(refused.detail)
    return 200, ""


async def scenario() -> int:
    async with app_on(InMemoryMessageBus()) as app:
        agent = await app.add_agent("leader")
        session = await app.add_session(agent, "leader")
        ui = await app.tap(session)
        app.script("leader").add(CallTool("GatedAction", {"note": "deploy"}), Text("deployed"))

        await post(app, agent, session, UserMsg(name="user", content="please deploy"))
        await app.settle()
        ask = await ui.wait_for("REQUIRE_USER_CONFIRM")
        say(f"1. the session parks on a confirmation: {await app.parked_status(agent, session)}")
        status, reason = await post(app, agent, session, UserMsg(name="user", content="is it done?"))
        say(f"   a message now: HTTP {status} {reason!r}")

        answering, answered = asyncio.Event(), asyncio.Event()

        async def resume_answers_late(_script: str) -> None:
            answering.set()
            await answered.wait()

        app.book.while_answering = resume_answers_late
        answer = UserConfirmResultEvent(
            reply_id=ask["reply_id"],
            confirm_results=[
                ConfirmResult(confirmed=True, tool_call=ToolCallBlock.model_validate(call))
                for call in ask["tool_calls"]
            ],
        )
        status, _ = await post(app, agent, session, answer)
        try:
            await asyncio.wait_for(answering.wait(), 10)
        except asyncio.TimeoutError as late:
            raise CannotRun("the resume run never asked its model for the next turn") from late
        stored = await app.parked_status(agent, session)
        say(f"2. the user confirms: HTTP {status}; the resume run is in flight: {app.run_task(session) is not None}; "
            f"the stored state says {stored}")
        during, during_reason = await post(app, agent, session, UserMsg(name="user", content="is it done now?"))
        say(f"3. a message during the resume: HTTP {during} {during_reason!r}")
        answered.set()
        app.book.while_answering = None
        await app.settle()
        say(f"4. the resume ends; the session is {await app.parked_status(agent, session)}")
        if stored == "idle" or app.run_task(session) is not None:
            raise CannotRun("the window was not hit: the stored state was not parked during the resume")
    if during == 409 and WAITING in during_reason:
        say(f"CONFIRMED on agentscope {VERSION}: during the resume of an answered call the endpoint "
            "refused a message saying the session waits for the answer")
        return 1
    say(f"not reproduced on agentscope {VERSION}: during the resume the endpoint answered {during}"
        + (f" ({during_reason})" if during_reason else ""))
    return 0


async def main() -> int:
    try:
        if "--with-fix" in sys.argv[1:]:
            import reference_fix

            outcome = reference_fix.apply()
            if "message-while-parked" not in outcome.fixes:
                raise CannotRun(f"message-while-parked is not applied: {reference_fix.status()}")
            say("reference fixes applied: " + ", ".join(outcome.fixes))
        else:
            apply_previous_fix()
        return await scenario()
    except CannotRun as cannot:
        say(f"cannot run: {cannot}")
        return 3


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

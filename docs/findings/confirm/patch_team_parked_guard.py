"""The patch layer ``docs/examples/team_parked_guard.py`` on agentscope's own
bus: does it clear F1, and does it leave a registration, a payload or a
stop behind?

What it shows: F1's story (``f1_parked_continuation_error.py``): the user
messages ``solo``, whose model calls a tool that waits (``GatedAction``:
the user's confirmation; ``ExternalJob``: an external result); a teammate
delivers while the model answers, so the payload is the run's to handle at
its turn tail. Each scenario runs on an app of its own, then settles and
looks at the bus and the stored session:

Z. (information, the control) without the layer: on 2.0.7 and 2.0.8 the
   parked run goes around with no input and ends ``REPLY_END(ERROR)`` (F1).
A. (counted) with the layer; the user confirms.
B. (counted) with the layer; the user presses stop on the card instead.
C. (counted) with the layer; ``ExternalJob``, the external result arrives.

For A, B and C it counts as the layer's failure: any ``REPLY_END(ERROR)``;
the consumer registration left behind once the run has parked (no run is
consuming the inbox) or at the end; the payload lost (in neither the inbox
nor the stored context at the end); the confirmed call not run once (A),
the result not completing the call (C), or the answered reply never ending
``completed``; the stop not ending the reply ``interrupted`` (B). The
window is hit when, parked, the payload is still queued (not lost, not
yet read), as the layer means it to be.

How the window is hit: F1's natural order, no hook in the bus: the teammate
waits for ``MODEL_CALL_START`` and delivers; the scripted model answers
once the delivery is done. The layer is imported from its file and
installed as a team would (``install()``, ``uninstall()`` after Z's
control); the bus is agentscope's own ``InMemoryMessageBus``.

Exit 1 when a counted scenario shows a failure of the layer, 0 when none
does, 2 when no scenario hit the window, 3 on the script's own crash.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/patch_team_parked_guard.py
"""
from __future__ import annotations

import asyncio
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import VERSION, App, app_on, describe, hint, in_memory_peek, run_script, say, verdict  # noqa: E402
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys  # noqa: E402
from agentscope.event import ConfirmResult, ExternalExecutionResultEvent, UserConfirmResultEvent  # noqa: E402
from agentscope.message import ToolCallBlock, ToolResultBlock, ToolResultState  # noqa: E402

from fakes.model import CallTool, Text  # noqa: E402

#: The layer under test, as a team keeps it.
LAYER = Path(__file__).resolve().parents[2] / "examples" / "team_parked_guard.py"


def load_layer():
    spec = importlib.util.spec_from_file_location("team_parked_guard", LAYER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Outcome:
    name: str
    tool: str
    answer: str
    parked: dict = field(default_factory=dict)
    end: dict = field(default_factory=dict)
    ends: list[str] = field(default_factory=list)
    ran: int = 0
    payload: str = ""

    @property
    def window_hit(self) -> bool:
        return any(self.payload in p for p in self.parked.get("inbox", []))

    def problems(self) -> list[str]:
        out = []
        errors = [e for e in self.ends if "finished_reason=error" in e]
        if errors:
            out.append(f"REPLY_END(ERROR): {errors}")
        if self.parked.get("registered") is not None:
            out.append("the consumer registration is left behind while parked, with no run")
        if self.end.get("registered") is not None:
            out.append("the consumer registration is left behind at the end")
        if not self.end.get("stored") and not any(self.payload in p for p in self.end.get("inbox", [])):
            out.append("the payload is lost")
        if self.answer == "stop":
            if not any("finished_reason=interrupted" in e for e in self.ends):
                out.append("the stop did not end the reply interrupted")
        elif self.answer == "confirm" and self.ran != 1:
            out.append(f"{self.tool} ran {self.ran} time(s) after its confirmation")
        elif self.answer == "result" and self.end.get("status") != "idle":
            out.append(f"the result did not complete the call: {self.end.get('status')}")
        if self.answer != "stop" and not any("finished_reason=completed" in e for e in self.ends):
            out.append("the answered reply never ended completed")
        return out

    def report(self) -> None:
        p, e = self.parked, self.end
        say(f"   parked: status {p.get('status')}; registration {_reg(p.get('registered'))}; "
            f"inbox {p.get('inbox') or 'empty'}; wake-ups queued {p.get('wakeups')}")
        ran = f"; {self.tool} ran {self.ran} time(s)" if self.tool == "GatedAction" else ""
        say(f"   answer: {self.answer}{ran}")
        say(f"   REPLY_END in order: {self.ends or 'none'}")
        say(f"   at the end: status {e.get('status')}; registration {_reg(e.get('registered'))}; "
            f"inbox {e.get('inbox') or 'empty'}; payload in the stored context {e.get('stored')}")


def _reg(value: object) -> str:
    return "gone" if value is None else f"LEFT BEHIND ({value!r})"


async def look(app: App, agent: str, session: str, payload: str) -> dict:
    bus = app.bus
    return dict(
        status=await app.parked_status(agent, session),
        registered=await bus.registry_get(
            MessageBusKeys.inbox_consumer(session), MessageBusKeys.INBOX_CONSUMER_FIELD,
        ),
        inbox=[str(p.get("hint", p)) for p in in_memory_peek(bus, MessageBusKeys.inbox(session))],
        wakeups=len(in_memory_peek(bus, MessageBusKeys.wakeup_queue())),
        stored=payload in await app.context_texts(agent, session),
    )


def answer_to(ask: dict, answer: str):
    calls = [ToolCallBlock.model_validate(c) for c in ask["tool_calls"]]
    if answer == "confirm":
        return UserConfirmResultEvent(
            reply_id=ask["reply_id"],
            confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in calls],
        )
    return ExternalExecutionResultEvent(
        reply_id=ask["reply_id"],
        execution_results=[
            ToolResultBlock(id=c.id, name=c.name, output="the job finished",
                            state=ToolResultState.SUCCESS)
            for c in calls
        ],
    )


async def story(name: str, tool: str, answer: str) -> Outcome:
    payload = f"teammate: staging for {name} is ready"
    outcome = Outcome(name=name, tool=tool, answer=answer, payload=payload)
    async with app_on(InMemoryMessageBus()) as app:
        agent = await app.add_agent("solo")
        session = await app.add_session(agent, "solo")
        ui = await app.tap(session)
        app.script("solo").add(CallTool(tool, {"note": name}), Text("done"), Text("noted"))
        delivered = asyncio.Event()

        async def team_member() -> None:
            await ui.wait_for("MODEL_CALL_START")
            await app.deliver(agent, session, hint(payload, "team member"))
            delivered.set()

        async def model_answers_after(_script: str) -> None:
            await delivered.wait()

        app.book.while_answering = model_answers_after
        member = asyncio.create_task(team_member())
        await app.post_chat(agent, session, "please go ahead")
        await member
        await app.settle()
        app.book.while_answering = None
        outcome.parked = await look(app, agent, session, payload)
        asking = "REQUIRE_USER_CONFIRM" if tool == "GatedAction" else "REQUIRE_EXTERNAL_EXECUTION"
        ask = await ui.wait_for(asking)
        if answer == "stop":
            say(f"   stop: HTTP {await app.press_stop(agent, session)}")
        else:
            await app.post_chat_event(agent, session, answer_to(ask, answer))
        await asyncio.sleep(0.2)
        await app.settle()
        outcome.ends = [describe(e) for e in ui.events if e.get("type") == "REPLY_END"]
        outcome.ran = len([r for r in app.desk.runs(tool) if r.session_id == session])
        outcome.end = await look(app, agent, session, payload)
    return outcome


async def main() -> int:
    layer = load_layer()
    say(f"Z. (information) without the layer, on agentscope {VERSION}: F1's story, then confirm")
    control = await story("Z", "GatedAction", "confirm")
    control.report()
    say(f"   without the layer: {'; '.join(control.problems()) or 'nothing wrong'}")
    layer.install()
    try:
        counted = []
        for name, tool, answer in (("A", "GatedAction", "confirm"), ("B", "GatedAction", "stop"),
                                   ("C", "ExternalJob", "result")):
            say(f"{name}. with team_parked_guard installed: {tool}, then {answer}")
            outcome = await story(name, tool, answer)
            outcome.report()
            counted.append((name, outcome))
    finally:
        layer.uninstall()
    return verdict(
        counted,
        "the payload was not queued when the run parked",
        "with the layer, no error reply, no registration left, the payload kept and "
        "read after the answer, each answer (confirm, stop, result) honoured",
    )


if __name__ == "__main__":
    run_script(main)

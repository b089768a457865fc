"""The message-while-parked fix (F2, I8): where it applies, what it changes.

A message to a session parked on a pending call, with no run holding it, is
refused by the chat endpoint (409, "waiting for the answer"); while a run
holds the session (a resume among them) the endpoint answers as agentscope
does for any run in flight. One that reaches a run anyway (a channel's
``message`` trigger) is delivered to the inbox through ``deliver_to_inbox``
and, when the agent resumes, queued again as a ``message`` trigger: it
reaches the agent as the user's own turn and is answered. The diff shipped
in ``patches/`` is the text the runtime patches apply.
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from agentscope.app._router._schema import ChatRequest
from agentscope.app.message_bus import MessageBusKeys
from agentscope.message import UserMsg
from fastapi import HTTPException

import reference_fix
from harness.world import agentscope_under_test
from harness.kernel.tasks import Op
from harness.world.surface import chat_endpoint
from properties.machine import machine_enforcing
from properties.story.playback import playing
from reference_fix import message_while_parked as fix
from reference_fix.diffs import diff_path

SHIPPED = [diff_path("message-while-parked", release) for release in ("2.0.7", "2.0.8", "2.0.9", "2.0.10", "2.0.11")]
VERSION = agentscope_under_test.version()
REFUSAL = next((p.refusal() for p in fix.PATCHES if p.refusal() is not None), None)
needs_target = pytest.mark.skipif(REFUSAL is not None, reason=str(REFUSAL))


def _diff_lines(diff: Path, sign: str) -> list[str]:
    lines = diff.read_text(encoding="utf-8").splitlines()
    return [line[1:] for line in lines if line.startswith(sign) and not line.startswith(sign * 3)]


@pytest.mark.parametrize("diff", SHIPPED, ids=lambda d: d.name)
def test_each_shipped_diff_adds_exactly_what_the_patches_add(diff: Path):
    """One diff per release holds the three parts: it only adds lines, and
    they are the lines the runtime patches add (the diff of the installed
    release is held equal to the runtime change, byte for byte, by
    ``test_every_fix_for_the_installed_release_ships_its_diff``)."""
    assert _diff_lines(diff, "-") == []
    added = Counter()
    for patch in fix.PATCHES:
        added += Counter(patch.after.splitlines()) - Counter(patch.before.splitlines())
    assert Counter(_diff_lines(diff, "+")) == added
    assert [l for l in diff.read_text(encoding="utf-8").splitlines() if l.startswith("+++")] == [
        "+++ b/src/agentscope/app/_router/_chat.py", "+++ b/src/agentscope/app/_service/_chat.py",
    ]


@pytest.mark.parametrize("release", ["2.0.6", "2.0.12"])
def test_refuses_a_release_it_was_not_written_for(release: str):
    for patch in fix.PATCHES:
        with pytest.raises(reference_fix.FixRefused, match=rf"targets agentscope 2\.0\.7.*; this agentscope is {release}"):
            patch.check_target(release, patch.before)


def test_refuses_a_targeted_release_whose_code_is_not_what_it_expects():
    for patch in fix.PATCHES:
        with pytest.raises(reference_fix.FixRefused, match=f"does not contain the code the {patch.name} fix"):
            patch.check_target("2.0.8", "async def chat(): ...  # a modified checkout")


def test_its_parts_apply_together_or_not_at_all():
    """The route calls the service's new method, the run the other: one
    part must not apply where another refuses."""
    assert len({p.refusal() for p in fix.PATCHES}) == 1


def test_on_the_installed_release_it_applies_or_refuses():
    if REFUSAL is None:
        assert VERSION in fix.TARGET_RELEASES
        return
    with pytest.raises(reference_fix.FixRefused, match=VERSION):
        fix.PATCHES[0].apply()


@contextmanager
def _fixed():
    """The fix applied for the block (left as found if it already was)."""
    was = [p.is_applied() for p in fix.PATCHES]
    for patch in fix.PATCHES:
        patch.apply()
    try:
        yield
    finally:
        for patch, applied in reversed(list(zip(fix.PATCHES, was))):
            if not applied:
                patch.remove()


def _message_while_parked(via: str) -> dict:
    """``solo`` parks on a confirmation and its run ends; the user writes
    to it ``via`` the chat endpoint or a channel; later the user confirms.
    What became of the message."""
    machine = machine_enforcing("I8", parked_messages=True, cast=("leader", "solo"))()
    found: dict = {"violations": []}
    try:
        machine.user_sends_message(session="solo", model_turn="calls GatedAction")
        machine.everything_settles()
        machine.user_messages_parked_session(session="solo", via=via)
        (marker, found["refused"]), = machine.ledger.parked_messages["solo"]
        for step in (
            machine.everything_settles,
            lambda: machine.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False),
            machine.everything_settles,
        ):
            try:
                step()
            except AssertionError as violation:
                found["violations"].append(str(violation).split("\n")[0])
        view = machine.world.observe_session("solo")
        found["reached"] = any(marker in hint for hint in view.context_hints) or marker in view.context_user_texts
        found["errors"] = sum(
            1 for e in view.events if e.get("type") == "REPLY_END" and e.get("finished_reason") == "error"
        )
        found["parked"] = view.parked_status
        return found
    finally:
        machine.world.close()


@needs_target
@pytest.mark.parametrize("via", ["chat endpoint", "channel"])
def test_a_message_while_parked_is_dropped_with_an_error_unless_fixed(via: str):
    if not any(p.is_applied() for p in fix.PATCHES):
        without = _message_while_parked(via)
        assert not without["refused"] and not without["reached"] and without["errors"] == 1
        assert any(v.startswith("I8") for v in without["violations"]), without
    with _fixed():
        fixed = _message_while_parked(via)
    assert fixed["violations"] == [] and fixed["errors"] == 0 and fixed["parked"] == "idle"
    if via == "chat endpoint":
        assert fixed["refused"] and not fixed["reached"]  # 409: the user is told
    else:
        assert not fixed["refused"] and fixed["reached"]  # kept, then answered after the resume


@needs_target
def test_the_route_function_is_patched_in_place_and_restored():
    """Every name bound to the route function (the web framework's route,
    the harness's import) runs the fix; removing it restores the code."""
    from agentscope.app._router import _chat as route
    from agentscope.app._service._chat import ChatService

    from harness.world.surface import chat_endpoint

    if any(p.is_applied() for p in fix.PATCHES):
        pytest.skip("the fix is applied for the whole run")
    function, code, routes = route.chat, route.chat.__code__, len(route.chat_router.routes)
    with _fixed():
        assert route.chat is function is chat_endpoint
        assert "awaiting_tool_calls" in route.chat.__code__.co_names
        assert route.chat.__code__.co_filename == code.co_filename  # tracebacks name the module
        assert len(route.chat_router.routes) == routes, "the route decorator is not run again"
        assert hasattr(ChatService, "awaiting_tool_calls") and hasattr(ChatService, "_keep_message_while_parked")
        assert {p.unified_diff() for p in fix.PATCHES} == {fix.unified_diff()}, "one diff for the three"
    assert route.chat.__code__ is code
    assert not hasattr(ChatService, "awaiting_tool_calls")
    assert "_keep_message_while_parked" not in ChatService._run_impl.__code__.co_names


# ── the reason of a 409, the inbox lock, the kept message's form ─────

WAITING = "is waiting for the answer to"
IN_FLIGHT = "already has an active chat run"


async def _post(app, agent_id: str, session_id: str, text: str) -> tuple[int, str]:
    """POST /chat/ with a user message, through agentscope's route: the
    status and, for a refusal, its reason."""
    request = ChatRequest(agent_id=agent_id, session_id=session_id, input=UserMsg(name="user", content=text))
    deps = dict(user_id=app.user_id, chat_service=app.chat_service, chat_run_registry=app.registry, message_bus=app.bus)
    try:
        await chat_endpoint(request, **deps)
    except HTTPException as refused:
        return refused.status_code, str(refused.detail)
    return 200, ""


def _posts(story, alias: str, text: str) -> tuple[int, str]:
    """The user posts ``text`` to ``alias`` on node 0 (the post runs until
    it answers)."""
    world = story.world
    app = world.nodes[0].app
    posted = world._act(_post(app, world._agents[alias], world.sessions[alias], text), f"user posts to {alias}", alias, 0)
    world.actors.finish(posted)
    assert posted.task.done()
    return posted.task.result()


def _parked(story, alias: str = "solo") -> None:
    story.user_sends_message(session=alias, model_turn="calls GatedAction")
    story.everything_settles()
    assert story.world.observe_session(alias).parked_status != "idle"


@needs_target
def test_during_a_resume_the_endpoint_gives_the_busy_refusal_not_waiting_for_an_answer():
    """Point 1: while the resume of an answered call runs, the stored state
    is still parked (the run persists at its end). The endpoint answers
    with the run registry's refusal of a run in flight, the one it gives
    any message sent while a run works, never that the session waits for
    the answer to its call; before the answer it says that."""
    with _fixed(), playing(("I8", "I15"), parked_messages=True, cast=("leader", "solo")) as story:
        _parked(story)
        status, parked_reason = _posts(story, "solo", "is it done?")
        assert status == 409 and WAITING in parked_reason and "1 tool call(s)" in parked_reason
        story.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False)
        story.dispatcher_processes_queue()  # the resume run takes its turn and holds the session
        assert story.world.run_of("solo") is not None
        assert story.world.observe_session("solo").parked_status != "idle"  # as stored: not yet persisted
        status, resume_reason = _posts(story, "solo", "is it done now?")
        assert status == 409 and IN_FLIGHT in resume_reason and WAITING not in resume_reason, resume_reason
        story.everything_settles()
        assert story.world.observe_session("solo").parked_status == "idle"
        assert _posts(story, "solo", "thanks") == (200, "")  # answered: nothing holds or parks it


@needs_target
def test_a_kept_message_is_delivered_under_the_inbox_lock():
    """Point 2: the run that keeps a channel's message pushes it onto the
    inbox holding the inbox lock (``deliver_to_inbox``), as every producer
    does; the hand-off protocol then wakes the session (a wake-up the
    parked agent skips)."""
    with _fixed(), playing(("I8",), parked_messages=True, cast=("leader", "solo")) as story:
        _parked(story)
        world = story.world
        sid = world.sessions["solo"]
        story.user_messages_parked_session(session="solo", via="channel")
        world.finish_dispatcher(0)
        run = world.run_of("solo")
        assert run is not None
        push = Op("queue_push", MessageBusKeys.inbox(sid))
        world.actors.finish(run, stop=world.actors.held_at(push))
        assert world.actors.held_at(push)(run), "the kept message is pushed onto the inbox"
        assert world._inspector.lock_holder(MessageBusKeys.inbox_lock(sid)) is not None, "under the inbox lock"


@needs_target
def test_a_kept_message_reaches_the_agent_as_the_users_turn_and_is_answered():
    """Point 3: a channel's message that meets the parked agent waits in the
    inbox until the user answers; then it is the user's own message in the
    agent's context (not a hint on the resumed reply), and a reply of its
    own answers it, after the resumed one."""
    with _fixed(), playing(("I8",), parked_messages=True, cast=("leader", "solo")) as story:
        _parked(story)
        story.user_messages_parked_session(session="solo", via="channel")
        story.everything_settles()
        (marker, refused), = story.ledger.parked_messages["solo"]
        view = story.world.observe_session("solo")
        assert not refused and view.parked_status != "idle"
        assert any(marker in str(p.get("hint")) for p in view.queued), "kept in the inbox while parked"
        story.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False)
        story.everything_settles()
        view = story.world.observe_session("solo")
        assert view.parked_status == "idle" and not view.queued
        assert marker in view.context_user_texts and not any(marker in h for h in view.context_hints)
        ends = [e for e in view.events if e.get("type") == "REPLY_END"]
        assert [e.get("finished_reason") for e in ends][-2:] == ["completed", "completed"], ends
        assert len({e.get("reply_id") for e in ends[-2:]}) == 2, "the resumed reply, then one for the message"


@needs_target
def test_a_message_kept_across_a_second_parking_is_kept_again():
    """The resumed reply parks again (its model asks for another
    confirmation): the message queued on the resume meets a parked agent
    once more and is kept again; the second answer lets it through."""
    with _fixed(), playing(("I8",), parked_messages=True, cast=("leader", "solo")) as story:
        _parked(story)
        story.user_messages_parked_session(session="solo", via="channel")
        story.everything_settles()
        (marker, _), = story.ledger.parked_messages["solo"]
        story.script("solo", "calls GatedAction")  # the resumed reply asks again
        story.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False)
        story.everything_settles()
        view = story.world.observe_session("solo")
        assert view.parked_status != "idle" and marker not in view.context_user_texts
        assert any(marker in str(p.get("hint")) for p in view.queued), "kept again"
        story.user_answers_confirmation(session="solo", decision="confirms", posted_to_leader=False)
        story.everything_settles()
        view = story.world.observe_session("solo")
        assert view.parked_status == "idle" and marker in view.context_user_texts and not view.queued

"""The message-while-parked fix (F2, I8): where it applies, what it changes.

A message to a session parked on a pending call is refused by the chat
endpoint (409), and one that reaches a run anyway (a channel's ``message``
trigger) is kept in the inbox and reaches the agent after the resume. The
diff shipped in ``patches/`` is the text the runtime patches apply.
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.machine import machine_enforcing
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
        assert not fixed["refused"] and fixed["reached"]  # kept, then drained by the resume


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

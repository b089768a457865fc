"""The reference fix applies where it should and refuses where it should not.

These tests run against whichever agentscope is installed: on a release the
fix targets they apply and remove it; on any other they check it refuses
with a message that names the release. The diff shipped in ``patches/`` is
checked against the text the runtime patch applies, so the two forms of the
fix cannot drift apart.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import reference_fix
from harness.world import agentscope_under_test
from reference_fix import parked_continuation as fix

PATCH = Path(__file__).resolve().parent.parent / "patches" / "agentscope-2.0.8-parked-continuation.diff"
TARGETED = agentscope_under_test.version() in fix.TARGET_RELEASES


def _chat_source() -> str:
    from agentscope.app._service import _chat

    return Path(_chat.__file__).read_text(encoding="utf-8")


def test_refuses_a_release_it_was_not_written_for():
    with pytest.raises(reference_fix.FixRefused, match=r"targets agentscope 2\.0\.7.*2\.0\.8; this agentscope is 2\.0\.11"):
        fix.check_target("2.0.11", _chat_source())


def test_refuses_a_targeted_release_whose_code_is_not_what_it_expects():
    with pytest.raises(reference_fix.FixRefused, match="does not contain the code the parked-continuation fix replaces"):
        fix.check_target("2.0.8", "def _run_impl(): ...  # a modified checkout")


def test_accepts_the_code_it_was_written_against():
    source = "...\n" + fix.UNGUARDED + "...\n"
    assert fix.check_target("2.0.8", source) == "2.0.8"


def test_patch_file_is_the_runtime_change():
    patch = PATCH.read_text(encoding="utf-8")
    removed = [l[1:] for l in patch.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l[1:] for l in patch.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert removed == []
    assert "\n".join(added) + "\n" in fix.GUARDED
    assert "has_awaiting_tool_calls" in "\n".join(added)
    assert "released = True" not in "\n".join(added), "the parked exit must not skip abandon_inbox_consumer"


def test_on_the_installed_release_it_applies_and_removes_or_refuses():
    from agentscope.app._service._chat import ChatService

    if not TARGETED:
        with pytest.raises(reference_fix.FixRefused, match=agentscope_under_test.version()):
            fix.apply()
        return
    was_applied = fix.is_applied()
    try:
        fix.apply()
        assert "has_awaiting_tool_calls" in ChatService._run_impl.__code__.co_names
    finally:
        if not was_applied:
            fix.remove()
            assert "has_awaiting_tool_calls" not in ChatService._run_impl.__code__.co_names


# ── the dispatcher-survival fix ───────────────────────────────────────

from reference_fix import dispatcher_survival  # noqa: E402
from properties.machine import machine_enforcing  # noqa: E402



def _dispatcher_story() -> bool:
    """A failed lock check in the dispatcher, then a delivery: whether the
    dispatcher's loop is still running afterwards."""
    machine = machine_enforcing("I13", bus_faults=True)()
    machine.bus_operation_fails(operation="is_locked session lock", session="solo")
    machine.payload_arrives(source="channel", to="solo")
    try:
        machine.dispatcher_processes_queue()
    except AssertionError as violation:  # I13, where the loop ends
        assert "I13" in str(violation)
    alive = machine.world.dispatcher() is not None
    machine.world.close()
    return alive


def test_the_dispatcher_dies_of_one_failed_bus_call_unless_fixed():
    if dispatcher_survival.PATCH.refusal() is not None:
        pytest.skip(dispatcher_survival.PATCH.refusal())
    assert not _dispatcher_story(), "without the fix the loop ends (I13 finds it)"
    dispatcher_survival.PATCH.apply()
    try:
        assert _dispatcher_story()
    finally:
        dispatcher_survival.PATCH.remove()
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher

    assert not hasattr(WakeupDispatcher, "_requeue_after_failure"), "remove() takes the added method away"


# ── the stop-reaches-slow-tools fix ───────────────────────────────────

from reference_fix import stop_reaches_slow_tools  # noqa: E402
from properties.rules.vocabulary import BACKGROUND  # noqa: E402



def _stopped_job_story() -> list[str]:
    """The user stops a reply whose background job is still in its offload
    window: what became of the job (the desk's record of it)."""
    machine = machine_enforcing("I14", background_jobs=True, interrupts=True, turns=(BACKGROUND,))()
    try:
        machine.user_sends_message(session="solo", model_turn=BACKGROUND)
        machine.user_interrupts(session="solo")
        machine.everything_settles()
        return [e.kind for e in machine.world.app.desk.events if e.tool == "BackgroundJob"]
    finally:
        machine.world.close()


def test_a_stopped_reply_leaves_its_slow_tool_running_unless_fixed():
    if stop_reaches_slow_tools.PATCH.refusal() is not None:
        pytest.skip(stop_reaches_slow_tools.PATCH.refusal())
    assert _stopped_job_story() == ["check", "run"], "without the fix the job runs on"
    stop_reaches_slow_tools.PATCH.apply()
    try:
        assert _stopped_job_story() == ["check", "run", "stopped"]
    finally:
        stop_reaches_slow_tools.PATCH.remove()


def _probe(name: str, before: str, after: str, *, more=(), targets=None) -> reference_fix.SourcePatch:
    """A throw-away patch of ``ChatService.interrupt`` on the installed release."""
    return reference_fix.SourcePatch(
        name=name, module="agentscope.app._service._chat", cls="ChatService", method="interrupt",
        before=before, after=after, targets=targets or (agentscope_under_test.version(),), covers=(),
        what=name, more=more,
    )


def test_two_patches_of_one_method_stack_and_come_off_in_reverse():
    from agentscope.app._service._chat import ChatService

    original = ChatService.interrupt
    first = _probe("probe-first", "' not found.\")", "' is not there.\")")
    second = _probe("probe-second", '{"session_id": session_id}', '{"session_id": session_id, "stacked": 1}')
    first.apply()
    try:
        second.apply()
        try:
            consts = repr(ChatService.interrupt.__code__.co_consts)
            assert "' is not there." in consts and "stacked" in consts
            with pytest.raises(RuntimeError, match="remove probe-second before probe-first"):
                first.remove()
        finally:
            second.remove()
        consts = repr(ChatService.interrupt.__code__.co_consts)
        assert "' is not there." in consts and "stacked" not in consts
    finally:
        first.remove()
    assert ChatService.interrupt is original


def test_every_fix_for_the_installed_release_ships_its_diff():
    from reference_fix.diffs import diff_path

    from reference_fix.diffs import for_installed

    fixes = for_installed()
    assert fixes, f"no fix targets agentscope {agentscope_under_test.version()}"
    for name, diff in fixes.items():
        shipped = diff_path(name, agentscope_under_test.version())
        assert shipped.is_file(), f"{shipped.name} is missing: run python -m reference_fix.diffs"
        assert shipped.read_text(encoding="utf-8") == diff, f"{shipped.name} is stale"


def test_a_release_no_fix_was_written_for_is_refused_in_one_line():
    refusal = reference_fix._refusal("2.0.6")  # pylint: disable=protected-access
    assert refusal.startswith("no reference fix was written for agentscope 2.0.6 (the fixes target 2.0.7, ")
    assert refusal.endswith("2.0.11)") and "\n" not in refusal


# ── a fix applies whole or not at all ─────────────────────────────────

#: Two throw-away fixes of ``ChatService.interrupt``: one that applies, and
#: one whose second patch's second edit is not in the installed source (as
#: on a modified checkout or a fork).
WHOLE = _probe("probe-whole", "' not found.\")", "' is not there.\")")
PARTIAL_FIRST = _probe("probe-partial-1", '{"session_id": session_id}', '{"session_id": session_id, "partial": 1}')
PARTIAL_SECOND = _probe(
    "probe-partial-2", "if session is None:", "if session is None:  # partial",
    more=(("code no release of agentscope has", "code"),),
)


@pytest.fixture
def fixes(monkeypatch):
    """Stand-in :data:`reference_fix.FIXES` (the given fixes only), undone
    afterwards with whatever was recorded."""
    from agentscope.app._service._chat import ChatService

    original = ChatService.interrupt
    monkeypatch.setattr(reference_fix, "_OUTCOME", None)

    def use(**fixes_by_name) -> None:
        monkeypatch.setattr(reference_fix, "FIXES", {n.replace("_", "-"): f for n, f in fixes_by_name.items()})

    yield use
    reference_fix.remove()
    assert ChatService.interrupt is original


def _interrupt_consts() -> str:
    from agentscope.app._service._chat import ChatService

    return repr(ChatService.interrupt.__code__.co_consts)


def test_a_fix_one_of_whose_patches_does_not_match_is_refused_whole(fixes):
    fixes(probe_whole=(WHOLE,), probe_partial=(PARTIAL_FIRST, PARTIAL_SECOND))
    planned = reference_fix.plan()
    assert planned.fixes == ["probe-whole"] and reference_fix.applicable() == [WHOLE]
    outcome = reference_fix.apply()
    assert outcome.fixes == ["probe-whole"] and list(outcome) == [WHOLE]
    (refused,) = outcome.refused
    assert (refused.fix, refused.method) == ("probe-partial", "ChatService.interrupt")
    assert "does not contain the code the probe-partial-2 fix replaces" in refused.reason
    assert str(refused).startswith("probe-partial refused: ChatService.interrupt: ") and "\n" not in str(refused)
    assert not PARTIAL_FIRST.is_applied() and not PARTIAL_SECOND.is_applied()
    assert "' is not there." in _interrupt_consts() and "partial" not in _interrupt_consts()
    assert reference_fix.refused() == outcome.refused


def test_a_patch_that_refuses_only_while_applied_takes_its_fix_off_again(fixes):
    # In the module's text, so the plan accepts it; not in ``interrupt``,
    # so applying it refuses, after the fix's first patch was applied.
    elsewhere = _probe("probe-partial-2", fix.UNGUARDED, fix.UNGUARDED)
    fixes(probe_whole=(WHOLE,), probe_partial=(PARTIAL_FIRST, elsewhere))
    if reference_fix.plan().fixes != ["probe-whole", "probe-partial"]:
        pytest.skip("the installed agentscope lacks the parked-continuation text")
    outcome = reference_fix.apply()
    assert outcome.fixes == ["probe-whole"]
    (refused,) = outcome.refused
    assert refused.method == "ChatService.interrupt" and "is not in interrupt" in refused.reason
    assert not PARTIAL_FIRST.is_applied() and "partial" not in _interrupt_consts()


def test_a_patch_for_another_release_is_a_variant_not_a_refusal(fixes):
    other = _probe("probe-other-release", "code no release of agentscope has", "code", targets=("2.0.6",))
    fixes(probe_whole=(WHOLE, other), probe_elsewhere=(other,))
    outcome = reference_fix.apply()
    assert outcome.fixes == ["probe-whole"] and outcome.refused == ()
    assert list(outcome) == [WHOLE] and not other.is_applied()


def test_when_no_fix_applies_it_is_refused_with_each_reason(fixes):
    fixes(probe_partial=(PARTIAL_FIRST, PARTIAL_SECOND))
    with pytest.raises(reference_fix.FixRefused, match=r"^probe-partial refused: ChatService\.interrupt: .*probe-partial-2"):
        reference_fix.apply()
    assert reference_fix.refusal().startswith("probe-partial refused: ")
    assert not PARTIAL_FIRST.is_applied() and not reference_fix.is_applied()


def test_the_header_names_the_fixes_applied_and_each_refused_one_in_a_line(fixes):
    from types import SimpleNamespace

    from harness.tools import pytest_plugin

    fixes(probe_whole=(WHOLE,), probe_partial=(PARTIAL_FIRST, PARTIAL_SECOND))
    config = SimpleNamespace(stash={pytest_plugin._ACTIVE: True})  # pylint: disable=protected-access
    assert any(line.startswith("hitl-harness: reference fix off;") for line in pytest_plugin.pytest_report_header(config))
    reference_fix.apply()
    header = [l for l in pytest_plugin.pytest_report_header(config) if l.startswith("hitl-harness: reference fix")]
    assert header[0].startswith("hitl-harness: reference fix ON (probe-whole); hypothesis profile ")
    assert len(header) == 2
    assert header[1].startswith("hitl-harness: reference fix probe-partial refused: ChatService.interrupt: ")
    assert "probe-partial-2" in header[1]

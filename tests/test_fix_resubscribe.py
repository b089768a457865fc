"""The resubscribe fix (F4b): a dropped pub/sub subscription no longer ends
the dispatchers' loops.

Run against whichever agentscope is installed: on a release the fix
targets, the story fails without it and holds with it (alone, and stacked
with dispatcher-survival); on any other release the fix refuses.
"""
from __future__ import annotations

import pytest
from agentscope.app.message_bus import MessageBusKeys

from properties.machine import machine_enforcing
from reference_fix import dispatcher_survival, resubscribe

from fix_checks import check_diff_file, check_refusals

REFUSAL = resubscribe.PATCH.refusal()
targeted = pytest.mark.skipif(REFUSAL is not None, reason=REFUSAL or "")


def test_refuses_releases_and_code_it_was_not_written_for():
    check_refusals(resubscribe.PATCHES)


@targeted
def test_the_diff_file_is_the_runtime_change():
    check_diff_file(resubscribe.PATCHES, "resubscribe")


def _drop_then_deliver(*patches) -> tuple[bool, int, list[str]]:
    """The wake-up dispatcher's subscription drops on the next signal; a
    channel then delivers to idle solo. Whether the dispatcher's loop still
    runs, how many payloads wait in solo's inbox once settled, and the I13
    violation if the machine raised one."""
    for patch in patches:
        patch.apply()
    machine = machine_enforcing("I13", bus_faults=True)()
    found = []
    try:
        machine.bus_operation_fails(operation="subscription to wake-up signals", session="solo")
        try:
            machine.payload_arrives(source="channel", to="solo")
            machine.everything_settles()
        except AssertionError as violation:
            found.append(str(violation).splitlines()[0])
        return machine.world.dispatcher() is not None, len(machine.world.observe_session("solo").queued), found
    finally:
        machine.world.close()
        for patch in reversed(patches):
            patch.remove()


@targeted
def test_a_dropped_subscription_ends_the_dispatcher_unless_fixed():
    alive, queued, found = _drop_then_deliver()
    assert (alive, queued) == (False, 1) and found and found[0].startswith("I13")
    assert _drop_then_deliver(*resubscribe.PATCHES) == (True, 0, [])


@targeted
def test_it_stacks_with_dispatcher_survival_which_still_applies_alone():
    assert dispatcher_survival.PATCH.refusal() is None
    assert _drop_then_deliver(dispatcher_survival.PATCH)[0] is False, "survival alone does not cover F4b"
    assert _drop_then_deliver(dispatcher_survival.PATCH, *resubscribe.PATCHES) == (True, 0, [])
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher

    assert not hasattr(WakeupDispatcher, "_drain_missed_triggers"), "remove() takes the added method away"


@targeted
def test_the_cancel_dispatcher_loops_subscribe_again():
    """Each cancel-dispatcher loop's subscription drops on its next message;
    with the fix each loop runs on and subscribes again (the message that
    broke it is lost: pub/sub keeps nothing)."""
    channels = {
        "cancel-dispatcher:session": MessageBusKeys.session_cancel_channel(),
        "cancel-dispatcher:task": MessageBusKeys.task_cancel_channel(),
        "cancel-dispatcher:interrupt": MessageBusKeys.session_interrupt_channel(),
    }

    def loops_alive_after_a_drop() -> list[str]:
        machine = machine_enforcing("I13", bus_faults=True)()
        world = machine.world
        try:
            for channel in channels.values():
                world.bus.fail_next("subscription", channel)
                world.setup(world.bus.publish(channel, {"session_id": "nobody", "task_id": "none"}))
            world.settle()
            live = {a.label for a in world.actors.live()}
            return sorted(label for label in channels if label in live)
        finally:
            world.close()

    assert loops_alive_after_a_drop() == []
    for patch in resubscribe.CANCEL_PATCHES:
        patch.apply()
    try:
        assert loops_alive_after_a_drop() == sorted(channels)
    finally:
        for patch in reversed(resubscribe.CANCEL_PATCHES):
            patch.remove()

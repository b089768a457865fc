"""The inbox-sweeper fix (F5): what a crashed run's producers deferred to
it, or the trigger drained for it, is woken for once its leases expire;
and what the fix costs in bus operations when nothing crashes.

Run against whichever agentscope is installed: on a release the fix
targets, the committed F5 stories fail without it and hold with it; on any
other release the fix refuses.
"""
from __future__ import annotations

from collections import Counter

import pytest
from fix_checks import check_diff_file, check_refusals

from properties.story.playback import playing
from reference_fix import inbox_sweeper

REFUSAL = inbox_sweeper.PATCH.refusal()
targeted = pytest.mark.skipif(REFUSAL is not None, reason=REFUSAL or "")

#: The machine the committed I11 counterexamples were found on.
I11_MACHINE = {
    "enforcing": ["I11"], "crashes": True, "bus_faults": False, "interrupts": False,
    "parked_messages": False, "messaged": ["leader", "solo"],
    "sources": ["team member", "channel", "background task"],
    "turns": ["calls GatedAction", "calls ExternalJob", "answers", "fails"],
}


def test_refuses_releases_and_code_it_was_not_written_for():
    check_refusals(inbox_sweeper.PATCHES)


@targeted
def test_the_diff_file_is_the_runtime_change():
    check_diff_file(inbox_sweeper.PATCHES, "inbox-sweeper")


def _after_the_crash(story_steps, cast, fixed: bool) -> tuple[str, list[str], bool]:
    """Play ``story_steps`` (then settle past every lease, as a story's end
    does): the I11 violation it raised ("" for none), the payloads still
    queued per session, and whether the world came to rest with nothing
    watched and no timer left."""
    patches = inbox_sweeper.PATCHES if fixed else ()
    for patch in patches:
        patch.apply()
    try:
        with playing(cast=cast, **I11_MACHINE) as story:
            story_steps(story)
            world = story.world
            story.teardown = lambda: None  # the checks below end it
        broken = ""
        try:
            story.settle()
            world.pass_time(601.0)
            story.settle()
            story._check(world.observe(settled=True, past_leases=True))  # pylint: disable=protected-access
        except AssertionError as violation:
            broken = str(violation).splitlines()[0]
        queued = [f"{alias}: {len(world.observe_session(alias).queued)}" for alias in cast]
        return broken, queued, world.is_settled()
    finally:
        story.world.close()
        for patch in reversed(patches):
            patch.remove()


def _registered_run_crashes(story) -> None:
    """I11-fc2b8c8b: solo's run, registered as its inbox's consumer, dies
    after a channel delivered (no wake-up was queued for it)."""
    story.user_sends_message(model_turn="answers", session="solo")
    story.payload_arrives(source="channel", to="solo")
    story.process_crashes(session="solo")


def _woken_run_crashes(story) -> None:
    """I11-309e87a8: the dispatcher drains the worker's wake-up and spawns
    its run, which dies before it consumes the invitation."""
    story.leader_invites_worker(worker_first_turn="calls GatedAction")
    story.one_task_takes_a_step(task="wakeup-dispatcher")
    story.one_task_takes_a_step(task="wakeup-dispatcher")
    story.process_crashes(session="worker")


@targeted
def test_a_registered_runs_crash_strands_the_payload_unless_fixed():
    broken, queued, _ = _after_the_crash(_registered_run_crashes, ["leader", "solo"], fixed=False)
    assert broken.startswith("I11") and queued == ["leader: 0", "solo: 1"]
    assert _after_the_crash(_registered_run_crashes, ["leader", "solo"], fixed=True) == (
        "", ["leader: 0", "solo: 0"], True,
    )


@targeted
def test_a_woken_runs_crash_strands_the_invitation_unless_fixed():
    cast = ["leader", "worker", "solo"]
    broken, queued, _ = _after_the_crash(_woken_run_crashes, cast, fixed=False)
    assert broken.startswith("I11") and queued == ["leader: 0", "worker: 1", "solo: 0"]
    assert _after_the_crash(_woken_run_crashes, cast, fixed=True) == (
        "", ["leader: 0", "worker: 0", "solo: 0"], True,
    )


@targeted
def test_with_nothing_crashed_the_sweeper_stops_and_the_list_empties():
    """A deferral lists the session; once its run has ended, the sweeper
    takes the entry off, reads the empty list and stops, so the world comes
    to rest (no timer)."""
    for patch in inbox_sweeper.PATCHES:
        patch.apply()
    try:
        with playing(cast=["leader", "solo"], **I11_MACHINE) as story:
            story.user_sends_message(model_turn="answers", session="solo")
            story.payload_arrives(source="channel", to="solo")
            story.everything_settles()
            world = story.world
            assert world.is_settled()
            trace = world.render_trace().splitlines()
        task, operation, key = trace[-1].split()[1:4]
        assert task.startswith("wakeup-sweeper") and (operation, key) == ("registry_getall", inbox_sweeper.WATCH)
        assert trace[-1].endswith("-> 0 fields")
    finally:
        for patch in reversed(inbox_sweeper.PATCHES):
            patch.remove()
    from agentscope.app import _bus_ops
    from agentscope.app._manager._wakeup_dispatcher import WakeupDispatcher

    assert not hasattr(WakeupDispatcher, "_sweep_inboxes"), "remove() takes the added methods away"
    assert "deferred:" not in _bus_ops.deliver_to_inbox.__code__.co_consts, "and restores deliver_to_inbox"


def test_its_key_is_built_from_message_bus_keys():
    from agentscope.app.message_bus import MessageBusKeys

    assert inbox_sweeper.WATCH == f"{MessageBusKeys.wakeup_queue()}:watch"
    for patch in inbox_sweeper.PATCHES:
        assert "agentscope:" not in patch.after, patch.name  # no hard-coded key


def _bus_operations(story_steps, fixed: bool) -> Counter:
    """The bus operations of ``story_steps`` played until everything
    settles, by operation (the harness's trace)."""
    patches = inbox_sweeper.PATCHES if fixed else ()
    for patch in patches:
        patch.apply()
    try:
        with playing(cast=["leader", "solo"], **I11_MACHINE) as story:
            story_steps(story)
            story.everything_settles()
            return Counter(entry.op for entry in story.world.interleaver.trace.entries)
    finally:
        for patch in reversed(patches):
            patch.remove()


def _added(story_steps) -> dict[str, int]:
    return dict(_bus_operations(story_steps, fixed=True) - _bus_operations(story_steps, fixed=False))


#: The dispatcher's start: its drain arms the sweeper, which reads the
#: list 30 s on (empty) and stops.
START = {"registry_getall": 1}


@targeted
def test_its_cost_in_bus_operations():
    """The figures in the module's docstring, in one process."""
    # A run the chat endpoint starts, with nothing deferred to it: none.
    assert _added(lambda story: story.user_sends_message(model_turn="answers", session="solo")) == START
    # A delivery to an idle session: the producer lists the session; the
    # run the dispatcher spawns for its wake-up is listed and unlisted; the
    # sweeper's reads (30 s on: the entry is new; 60 s on: it looks; then
    # empty) and its look (as below).
    assert _added(lambda story: story.payload_arrives(source="channel", to="solo")) == {
        "registry_get": 1 + 2, "registry_set": 1 + 1, "registry_del": 1 + 1, "registry_getall": 1 + 2,
        "is_locked": 1, "acquire_lock": 1, "queue_drain": 1, "release_lock": 1,
    }
    # A payload deferred to a running run: the producer's look, listing
    # and signal; the dispatcher's drain on the signal; the sweeper's
    # reads (30 s on: the entry is new; 60 s on: it looks; then empty)
    # and its look (the lock's state, the inbox lock, the entry, the
    # inbox, the registration, the entry taken off).
    assert _added(
        lambda story: (
            story.user_sends_message(model_turn="answers", session="solo"),
            story.payload_arrives(source="channel", to="solo"),
        ),
    ) == {
        "registry_get": 1 + 2, "registry_set": 1, "publish": 1, "queue_drain": 1 + 1,
        "registry_getall": 1 + 2, "is_locked": 1, "acquire_lock": 1, "release_lock": 1, "registry_del": 1,
    }

"""Redis mode: agentscope's own ``RedisMessageBus`` on a real redis-server,
with several nodes, under the interleaver.

What must hold for a Redis-mode verdict to mean anything: the world comes
to rest with no timer of the harness's making, a message published on one
node reaches the others within the step, leases run out on the virtual
clock (and only then), a dead node's lease is left to run out, the
reported bug is found across nodes, and a story replays byte for byte.
"""
from __future__ import annotations

import pytest
from agentscope.app.message_bus import MessageBusKeys

from harness.world.deployment import Deployment, DeploymentRefused
from harness.world.world import World
from properties.story.playback import playing, story_machine
from properties.violation import InvariantViolated

SEED_MACHINE = dict(
    enforcing=["I1"],
    cast=["leader", "worker", "solo"],
    turns=["calls GatedAction", "calls ExternalJob", "answers"],
    bus="redis",
    nodes=2,
)


@pytest.fixture
def world():
    started = World(Deployment("redis", 2))
    started.open_cast(with_chief=False)
    started.start()
    yield started
    started.close()


def test_a_started_world_rests_with_no_timer_and_nothing_held(world):
    """The dispatchers' subscription loops poll every second on the real
    bus; here a poll is one wait, so nothing keeps virtual time busy."""
    assert not world.has_timer()
    assert not world.interleaver.held()
    labels = sorted(r.label for r in world.interleaver.tasks())
    assert "wakeup-dispatcher@0" in labels and "wakeup-dispatcher@1" in labels


def test_leases_run_out_on_the_virtual_clock(world):
    """A TTL set on the real server lasts exactly its virtual seconds,
    however long the wall clock takes between steps."""
    bus = world.nodes[1].bus.inner
    assert world.setup(bus.try_lock("hitl-test-lock", ttl_secs=10))
    world.pass_time(9.9)
    assert world.setup(bus.is_locked("hitl-test-lock"))
    world.pass_time(0.1)
    assert not world.setup(bus.is_locked("hitl-test-lock"))


def test_a_message_published_on_one_node_reaches_the_other_within_the_step():
    """The user's stop lands on node 0; the run lives on node 1, whose
    cancel dispatcher must have the message before the step ends."""
    machine = story_machine(**{**SEED_MACHINE, "enforcing": ["I9"], "interrupts": True})
    try:
        machine.user_sends_message(session="solo", model_turn="answers", node=1)
        assert machine.world.run_of("solo").node == 1
        machine.user_interrupts(session="solo", node=0)
        trace = machine.world.render_trace()
        assert "cancel-dispatcher:interrupt@1" in trace
        received = [line for line in trace.splitlines() if " receive " in line and "@1" in line]
        assert received, trace
    finally:
        machine.world.close()


def test_a_dead_nodes_session_lock_stays_until_its_lease_runs_out():
    machine = story_machine(**{**SEED_MACHINE, "crashes": True})
    try:
        machine.user_sends_message(session="solo", model_turn="answers", node=1)
        session_lock = MessageBusKeys.session_lock(machine.world.sessions["solo"])
        assert machine.world.observe_session("solo").lock_leased
        machine.node_dies(node=1)
        assert machine.world.live_nodes() == [0]
        assert "solo" in machine.ledger.crashed
        assert not machine.world.interleaver.held() or all(
            r.node == 0 for r in machine.world.interleaver.held()
        )
        machine.world.pass_time(599)
        assert machine.world.observe_session("solo").lock_leased, session_lock
        machine.world.pass_time(2)
        assert not machine.world.observe_session("solo").lock_leased
    finally:
        machine.world.close()


def test_a_dead_nodes_run_waiting_for_a_lock_never_takes_it():
    """Node 0's run waits for the session lock node 1's run holds when
    node 0 dies. The timer of its wait still fires in the harness; its
    commands must not reach the server, or it takes the lock, starts a
    heartbeat that renews it for ever, and the story never comes to rest
    (it did: "still busy 3600 virtual seconds on")."""
    machine = dict(
        enforcing=["I11"], cast=["leader", "worker", "solo"], crashes=True, bus="redis", nodes=2,
        bus_faults=False, interrupts=False, parked_messages=False, messaged=["leader", "solo"],
        sources=["team member", "channel", "background task"],
        turns=["calls GatedAction", "calls ExternalJob", "answers", "fails"],
    )
    with playing(**machine) as story:
        story.user_sends_message(session="leader", model_turn="calls GatedAction", node=1)
        story.user_answers_confirmation(session="leader", decision="confirms", node=1, posted_to_leader=True)
        story.leader_invites_worker(worker_first_turn="answers")  # the user's message, on node 0
        story.node_dies(node=0)
        story.leader_invites_worker(worker_first_turn="calls ExternalJob")
    # leaving the block settled the world past every lease and checked I11


def test_the_reported_bug_across_two_nodes():
    """The run parks on node 1; a team member on node 0 delivers into its
    inbox at its turn tail: the spurious ReplyEnd(ERROR) of 2.0.7/2.0.8,
    or nothing on a release that fixed it."""
    import agentscope

    machine = story_machine(**SEED_MACHINE)
    try:
        machine.user_sends_message(session="leader", model_turn="calls GatedAction", node=1)
        machine.payload_arrives(source="team member", to="leader", node=0)
        if agentscope.__version__ in ("2.0.7", "2.0.8"):
            with pytest.raises(InvariantViolated, match="I1"):
                machine.everything_settles()
        else:
            machine.everything_settles()
        assert "» team member delivers to leader@0" in machine.world.render_trace()
    finally:
        machine.world.close()


def play_across_nodes() -> str:
    machine = story_machine(**SEED_MACHINE)
    try:
        machine.user_sends_message(session="leader", model_turn="calls ExternalJob", node=1)
        machine.payload_arrives(source="channel", to="leader", node=0)
        machine.dispatcher_processes_queue(node=1) if machine.world.waiting_dispatchers() else None
        machine.external_result_arrives(session="leader", node=0)
        try:
            machine.everything_settles()
        except AssertionError:
            pass
        return machine.world.render_trace()
    finally:
        machine.world.close()


def test_a_stream_id_the_server_assigned_reads_the_same_in_every_run():
    """2.0.11's event checkpoint stores a stream id the server derived from
    its clock: traces name such ids by first appearance; the fake bus's
    ids, counted from virtual time 0, stay as they are."""
    from harness.world.naming import Naming

    line = "registry_set   x#cursor  -> {}, then {}, then {} (fake: 0-7, 200-56)"
    one = Naming(1)(line.format("1796350501455-0", "1796350501455-1", "1796350501455-0"))
    other = Naming(1)(line.format("1796350501333-0", "1796350501401-0", "1796350501333-0"))
    assert one == other == "registry_set   x#cursor  -> entry1, then entry2, then entry1 (fake: 0-7, 200-56)"


def test_a_story_across_nodes_replays_identically():
    first = play_across_nodes()
    assert first.count("\n") > 40 and "@1" in first and "@0" in first
    assert first == play_across_nodes()


@pytest.fixture
def every_fix():
    """Every reference fix applied for the test, as the gate's
    ``--with-fix`` applies them; the suite's state restored after."""
    import reference_fix

    was = reference_fix.is_applied()
    if not was:
        reference_fix.apply()
    yield
    if not was:
        reference_fix.remove()


def test_with_every_fix_the_nodes_start_in_one_order_and_a_story_replays_identically(every_fix):
    """The fixes' dispatchers start tasks beside their loops (a drain, the
    inbox sweeper, which first waits a sweep interval): started one bus
    operation at a time, their commands reach the server in the same order
    in every run."""
    first = play_across_nodes()
    start = [line.split()[1] for line in first.splitlines()[:4]]
    assert start == ["wakeup-dispatcher@0", "_dispatch_batch@0", "cancel-dispatcher:session@0", "cancel-dispatcher:task@0"]
    assert first == play_across_nodes() == play_across_nodes()


@pytest.mark.parametrize(
    "bus, nodes, says",
    [
        ("kafka", 1, "unknown bus 'kafka'"),
        ("fake", 2, "several nodes need the redis bus"),
        ("redis", 0, "at least 1"),
    ],
)
def test_a_deployment_the_harness_cannot_build_is_refused_in_one_line(bus, nodes, says):
    with pytest.raises(DeploymentRefused, match=says) as refused:
        Deployment(bus, nodes)
    assert "\n" not in str(refused.value)


def test_one_node_stories_record_no_deployment_and_keep_their_names():
    assert Deployment.of(None, None).configuration() == {}
    assert Deployment.of("redis", None) == Deployment("redis", 2)
    assert Deployment.of("redis", 3).configuration() == {"bus": "redis", "nodes": 3}


def test_a_violation_found_on_the_way_replays_as_itself():
    """F13's story, as another property's search (I5's) would have written
    it down: replaying it enforces I1 too, so it fails as it did (every
    release 2.0.7-2.0.11 has F13)."""
    from dataclasses import replace
    from pathlib import Path

    from properties.story.playback import replay
    from properties.story.record import Counterexample

    folder = Path(__file__).parents[1] / "docs/findings/counterexamples/I1-4b9d3df6"
    recorded = Counterexample.load(folder)
    found_by_i5 = replace(recorded, machine={**recorded.machine, "enforcing": ["I5"]})
    failure = replay(found_by_i5)
    assert failure is not None and failure.counterexample.code == "I1"

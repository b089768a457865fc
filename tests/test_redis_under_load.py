"""Redis mode with a CPU-stressed neighbour: the same trace, and leases
that end exactly on the virtual clock.

The server's clock is the wall's, and a loaded machine stretches the wall
time between any two commands. Keys end on virtual time only
(:mod:`harness.kernel.redis_expiry`), so busy-looping processes beside a
story change nothing it shows.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest

from harness.kernel.redis_expiry import HELD, ExpiryOutOfReach, VirtualExpiry
from properties.story.playback import story_machine
from test_redis_mode import SEED_MACHINE, play_across_nodes

#: Busy-looping neighbours: more than the machine has cores, so the story's
#: process and the server wait for a core between commands.
NEIGHBOURS = max(4, 2 * (os.cpu_count() or 1))

#: One-second leases taken and run out, one after the other.
LEASES = 40


@contextlib.contextmanager
def busy_neighbours():
    """Processes that spin until the block ends."""
    spinning = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(NEIGHBOURS)
    ]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def play_leases_to_their_end() -> tuple[str, list[tuple[bool, bool]]]:
    """A dead node's session lock left to run out, then many one-second
    leases each checked a millisecond before and at its end: the trace and
    what each check saw."""
    machine = story_machine(**{**SEED_MACHINE, "crashes": True})
    world = machine.world
    try:
        machine.user_sends_message(session="solo", model_turn="answers", node=1)
        machine.node_dies(node=1)
        world.pass_time(599)
        held_after_599 = world.observe_session("solo").lock_leased
        world.pass_time(2)
        seen = [(held_after_599, world.observe_session("solo").lock_leased)]
        bus = world.nodes[0].bus.inner
        for n in range(LEASES):
            assert world.setup(bus.try_lock(f"hitl-test-lease-{n}", ttl_secs=1))
            world.pass_time(0.999)
            before_end = world.setup(bus.is_locked(f"hitl-test-lease-{n}"))
            world.pass_time(0.001)
            seen.append((before_end, world.setup(bus.is_locked(f"hitl-test-lease-{n}"))))
        return world.render_trace(), seen
    finally:
        world.close()


def test_leases_end_on_the_virtual_clock_with_busy_neighbours():
    quiet = play_leases_to_their_end()
    assert quiet[1] == [(True, False)] * (LEASES + 1)
    with busy_neighbours():
        loaded = play_leases_to_their_end()
    assert loaded[1] == quiet[1]
    assert loaded[0] == quiet[0]


def test_a_story_across_nodes_replays_identically_with_busy_neighbours():
    quiet = play_across_nodes()
    with busy_neighbours():
        loaded = play_across_nodes()
    assert quiet.count("\n") > 40
    assert loaded == quiet


def test_a_ttl_taken_over_is_left_to_virtual_time_alone(redis_server):
    server = redis_server()
    server.flush()
    client = server.client()
    expiry = VirtualExpiry(client)
    expiry.follow()
    client.set("lease", "1", ex=2)
    client.expire("queue-key", 5)  # no such key: nothing to take over
    expiry.follow()
    assert client.pttl("lease") > HELD - 60_000  # the server never ends it
    assert expiry.follow(1.999) == 0 and client.exists("lease")
    client.expire("lease", 2)  # renewed at virtual 1.999: ends at 3.999
    assert expiry.follow(0.001) == 0 and expiry.follow(1.998) == 0
    assert expiry.follow(0.001) == 1 and not client.exists("lease")


def test_a_ttl_not_in_whole_seconds_fails_rather_than_guess(redis_server):
    server = redis_server()
    server.flush()
    client = server.client()
    expiry = VirtualExpiry(client)
    expiry.follow()
    client.set("odd", "1", px=1500)
    with pytest.raises(ExpiryOutOfReach, match="TTL of odd unknown"):
        expiry.follow()

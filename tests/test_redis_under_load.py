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

from harness.kernel.redis_expiry import HELD, SYNCED_AT, ExpiryOutOfReach, VirtualExpiry, ttls_given
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


def fresh_expiry(redis_server):
    """An emptied server's client, and its expiry after a first call."""
    server = redis_server()
    server.flush()
    client = server.client()
    expiry = VirtualExpiry(client)
    expiry.follow()
    return client, expiry


def send(client, expiry, *args):
    """``args`` sent as the link sends a command: the TTLs it names noted first."""
    expiry.expect(ttls_given(args))
    return client.execute_command(*args)


def stall(client, key: str, after_command_ms: int, after_sync_ms: int) -> None:
    """What a server or process stalled by a loaded machine shows the next
    call: ``key``'s TTL run down by ``after_command_ms`` since its command,
    and ``after_sync_ms`` since the last call (its recorded time moved back;
    nothing sleeps)."""
    client.pexpire(key, client.pttl(key) - after_command_ms)
    seconds, micros = client.time()
    client.set(SYNCED_AT, int(seconds) * 1000 + int(micros) // 1000 - after_sync_ms)


def test_a_ttl_taken_over_is_left_to_virtual_time_alone(redis_server):
    client, expiry = fresh_expiry(redis_server)
    send(client, expiry, "SET", "lease", "1", "EX", 2)
    send(client, expiry, "EXPIRE", "queue-key", 5)  # no such key: nothing to take over
    expiry.follow()
    assert client.pttl("lease") > HELD - 60_000  # the server never ends it
    assert expiry.follow(1.999) == 0 and client.exists("lease")
    send(client, expiry, "EXPIRE", "lease", 2)  # renewed at virtual 1.999: ends at 3.999
    assert expiry.follow(0.001) == 0 and expiry.follow(1.998) == 0
    assert expiry.follow(0.001) == 1 and not client.exists("lease")


def test_a_ttl_is_taken_over_however_long_the_machine_stalled(redis_server):
    """Seconds of wall time between the calls around a command (a run saw
    2970 ms) once failed the run with ExpiryOutOfReach: agentscope took it
    for a failed bus call and retried, so the story took another path. The
    TTL is the one the command named, whatever the wall clock did."""
    client, expiry = fresh_expiry(redis_server)
    send(client, expiry, "SET", "lock", "token", "EX", 30, "NX")
    stall(client, "lock", after_command_ms=2_500, after_sync_ms=3_000)
    assert expiry.follow() == 0
    assert client.pttl("lock") > HELD - 60_000
    assert expiry.follow(29.999) == 0 and client.exists("lock")
    assert expiry.follow(0.001) == 1 and not client.exists("lock")


def test_a_ttl_that_seems_older_than_the_last_call_is_taken_over(redis_server):
    """The server reads its clock for keys once per turn of its loop, so a
    TTL given just after a call can seem to have run a millisecond longer
    than that call is old (a story failed on 599999 ms left, 1 ms after the
    call, with 600 s given)."""
    client, expiry = fresh_expiry(redis_server)
    client.hset("registry", "field", "1")
    send(client, expiry, "EXPIRE", "registry", 600)
    stall(client, "registry", after_command_ms=2, after_sync_ms=0)
    expiry.follow()
    assert expiry.follow(599.999) == 0 and expiry.follow(0.001) == 1


def test_a_script_ttl_is_the_one_whole_number_of_its_arguments_in_range(redis_server):
    """agentscope's compare-and-set script passes its EXPIRE's seconds
    among other arguments; the numbers that cannot be the TTL are out of
    range, however long the stall."""
    client, expiry = fresh_expiry(redis_server)
    script = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); redis.call('EXPIRE', KEYS[1], ARGV[3]); return 1"
    send(client, expiry, "EVAL", script, 1, "registry", "field", "7", 600)
    stall(client, "registry", after_command_ms=4_000, after_sync_ms=5_000)
    expiry.follow()
    assert expiry.follow(599.999) == 0 and expiry.follow(0.001) == 1


def test_a_ttl_is_known_until_its_command_is_answered(redis_server):
    """Another connection's call can come between a command's sending and
    the server applying it (and a reply lost to a cancelled wait never
    comes): the command's TTL stays known until it is answered."""
    client, expiry = fresh_expiry(redis_server)
    ttls = ttls_given(("SET", "lock", "t", "EX", 600, "NX"))
    expiry.expect(ttls)
    expiry.follow()  # another connection's call: the server lacks the command yet
    client.execute_command("SET", "lock", "t", "EX", 600, "NX")
    expiry.follow()
    expiry.answered(ttls)
    assert expiry.follow(599.999) == 0 and expiry.follow(0.001) == 1


def test_ttls_are_read_off_the_command():
    assert ttls_given(("SET", "k", "t", "EX", 600, "NX")) == {600_000}
    assert ttls_given(("SET", "k", "t", "NX", "PX", "1500")) == {1_500}
    assert ttls_given(("EXPIRE", "k", 30)) == {30_000}
    assert ttls_given(("PEXPIRE", b"k", b"250")) == {250}
    assert ttls_given(("SET", "k", "600")) == set() and ttls_given(("XADD", "k", "*", "f", 5)) == set()
    assert ttls_given(("EVAL", "script", 1, "ns", "f", "v", "x", 0)) == {1, 1_000}


def test_a_ttl_no_command_named_fails_rather_than_guess(redis_server):
    client, expiry = fresh_expiry(redis_server)
    client.set("odd", "1", px=1500)  # not through the link: nothing noted
    with pytest.raises(ExpiryOutOfReach, match="TTL of odd unknown"):
        expiry.follow()


def test_two_ttls_that_both_fit_fail_rather_than_guess(redis_server):
    client, expiry = fresh_expiry(redis_server)
    send(client, expiry, "SET", "a", "1", "EX", 3)
    expiry.expect({2_000})  # another command that could have given 2 s
    stall(client, "a", after_command_ms=1_500, after_sync_ms=2_000)
    with pytest.raises(ExpiryOutOfReach, match="were both given"):
        expiry.follow()

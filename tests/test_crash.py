"""A crashed run, as the harness models it, behaves as on Redis: its locks
and registration block until their leases run out, then stop blocking.

The crash model is the boundary the I11 property stands on, so it is shown
here on the real app: the session's run dies at its turn tail, a producer
delivers meanwhile, and the session lock (a 600 s lease, renewed every
300 s while its holder lived: it outlives the crash by 300 s here) and the
inbox consumer registration (600 s TTL, never renewed) hold until their
time is up and not a moment longer.
"""
from __future__ import annotations

from agentscope.app.message_bus import MessageBusKeys

from properties.machine import machine_enforcing


def test_a_crashed_runs_lock_and_registration_block_until_their_leases_expire():
    machine = machine_enforcing("I11", crashes=True)()
    try:
        machine.user_sends_message(session="solo", model_turn="answers")
        run = machine.world.run_of("solo")
        machine.process_crashes(session="solo")
        assert machine.world.run_of("solo") is None
        assert not run.done, "a crashed run never runs its cleanup"
        machine.payload_arrives(source="channel", to="solo")
        lock = MessageBusKeys.session_lock(machine.world.sessions["solo"])
        held = machine.world.observe_session("solo")
        assert held.lock_leased and held.consumer_registered
        machine.world.pass_time(299.0)
        assert machine.world.observe_session("solo").lock_leased
        machine.world.pass_time(2.0)
        assert not machine.world.observe_session("solo").lock_leased
        assert machine.world.observe_session("solo").consumer_registered
        machine.world.pass_time(300.0)
        assert not machine.world.observe_session("solo").consumer_registered
    finally:
        machine.world.close()

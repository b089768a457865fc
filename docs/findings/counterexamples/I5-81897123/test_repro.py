"""I5 (no inbox payload is lost, duplicated or reordered): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope 2.0.8
(reference fix off). This test plays the shrunk story
step by step on a fresh world and checks I5 after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                       # against the agentscope `import agentscope` finds
    pytest test_repro.py --hitl-reference-fix  # with the harness's reference fix applied

It writes nothing; with --hitl-counterexamples DIR a failure is also written to DIR
as a counterexample folder, and the output says where.
"""
from properties.story.playback import playing


def test_I5_81897123():
    with playing(
        bus_faults=True,
        cast=['leader', 'solo'],
        crashes=True,
        enforcing=['I17', 'I5'],
        interrupts=False,
        messaged=['leader', 'solo'],
        parked_messages=False,
        sources=['team member', 'channel', 'background task'],
        storage_faults=True,
        turns=['calls GatedAction', 'calls ExternalJob', 'answers'],
    ) as story:
        # 1. Every storage call for solo's session fails from now on (a corrupt row, a
        #    lost shard): a trigger for it can never be dispatched.
        story.storage_keeps_failing(session='solo')
        # 2. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 3. Every storage call for leader's session fails from now on (a corrupt row, a
        #    lost shard): a trigger for it can never be dispatched.
        story.storage_keeps_failing(session='leader')
        # 4. The next `log_append session events` on leader's key fails (the bus
        #    connection drops before the server gets it).
        story.bus_operation_fails(operation='log_append session events', session='leader')
        # 5. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 6. The wake-up dispatcher's subscription drops on its next message (the
        #    connection fails).
        story.bus_operation_fails(operation='subscription to wake-up signals', session='solo')
        # 7. The next `publish session events` on solo's key fails (the bus connection
        #    drops before the server gets it).
        story.bus_operation_fails(operation='publish session events', session='solo')
        # 8. The next `renewal of session lock` on leader's key fails: its lease is no
        #    longer renewed and runs out under its live holder.
        story.bus_operation_fails(operation='renewal of session lock', session='leader')
        # 9. A channel delivers a message to solo's inbox (deliver_to_inbox).
        story.payload_arrives(source='channel', to='solo')

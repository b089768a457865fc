"""I2 (no team-leader failure reminder unless a worker failed): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope 2.0.7
(reference fix off). This test plays the shrunk story
step by step on a fresh world and checks I2 after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                       # against the agentscope `import agentscope` finds
    pytest test_repro.py --hitl-reference-fix  # with the harness's reference fix applied

It writes nothing; with --hitl-counterexamples DIR a failure is also written to DIR
as a counterexample folder, and the output says where.
"""
from properties.story.playback import playing


def test_I2_74873666():
    with playing(
        bus_faults=False,
        cast=['leader', 'worker', 'solo'],
        crashes=False,
        enforcing=['I15', 'I2'],
        interrupts=False,
        messaged=['leader', 'solo'],
        parked_messages=False,
        sources=['team member', 'channel', 'background task'],
        turns=['calls GatedAction', 'calls ExternalJob', 'answers'],
    ) as story:
        # 1. The user asks the leader for help; the leader's model calls AgentInvite,
        #    which creates the worker's session and delivers the task to its inbox. The
        #    worker's model, when it runs, calls GatedAction, which waits for the user's
        #    confirmation (ASKING).
        story.leader_invites_worker(worker_first_turn='calls GatedAction')
        # 2. The wake-up dispatcher drains its trigger queue (spawned runs take their
        #    first turn).
        story.dispatcher_processes_queue()
        # 3. A team member delivers a message to worker's inbox (deliver_to_inbox).
        story.payload_arrives(source='team member', to='worker')
        # 4. A team member delivers a message to worker's inbox (deliver_to_inbox).
        story.payload_arrives(source='team member', to='worker')
        # 5. worker's run goes on until it ends or must wait.
        story.run_continues(session='worker')

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


def test_I2_05898800():
    with playing(
        bus_faults=False,
        cast=['leader', 'worker', 'solo'],
        crashes=False,
        enforcing=['I2', 'I5'],
        interrupts=False,
        late_wakeups=True,
        messaged=['leader', 'solo'],
        parked_messages=False,
        sources=['team member', 'channel', 'background task'],
        stepwise_deliveries=True,
        turns=['calls GatedAction', 'calls ExternalJob', 'answers'],
    ) as story:
        # 1. The user asks the leader for help; the leader's model calls AgentInvite,
        #    which creates the worker's session and delivers the task to its inbox. The
        #    worker's model, when it runs, calls ExternalJob, which waits for an
        #    external result (SUBMITTED).
        story.leader_invites_worker(worker_first_turn='calls ExternalJob')
        # 2. A channel delivers a message to solo's inbox (deliver_to_inbox) step by
        #    step, stopped before its first bus operation; then, one hand-off operation
        #    at a time: a delivery ×2, the wake-up dispatcher, a new delivery begins (a
        #    party that cannot move passes its move on to the next of a delivery, the
        #    run, the dispatcher that can). What is left of a delivery goes on as a
        #    movable task.
        story.payload_arrives_step_by_step(moves=['delivery', 'delivery', 'dispatcher', 'new delivery'], source='channel', to='solo')
        # 3. A background task delivers a message to worker's inbox (deliver_to_inbox).
        story.payload_arrives(source='background task', to='worker')
        # 4. A background task delivers a message to leader's inbox (deliver_to_inbox)
        #    step by step, stopped before its first bus operation; then, one hand-off
        #    operation at a time: a new delivery begins ×4, leader's run, a new delivery
        #    begins, leader's run ×2 (a party that cannot move passes its move on to the
        #    next of a delivery, the run, the dispatcher that can). What is left of a
        #    delivery goes on as a movable task.
        story.payload_arrives_step_by_step(moves=['new delivery', 'new delivery', 'new delivery', 'new delivery', 'run', 'new delivery', 'run', 'run'], source='background task', to='leader')
        # 5. A background task delivers a message to worker's inbox (deliver_to_inbox).
        story.payload_arrives(source='background task', to='worker')
        # 6. A team member delivers a message to worker's inbox (deliver_to_inbox) step
        #    by step, stopped before its first bus operation; then, one hand-off
        #    operation at a time: a delivery, the wake-up dispatcher, a new delivery
        #    begins, worker's run, a delivery, the wake-up dispatcher ×2, a delivery,
        #    the wake-up dispatcher, a delivery ×2 (a party that cannot move passes its
        #    move on to the next of a delivery, the run, the dispatcher that can). What
        #    is left of a delivery goes on as a movable task.
        story.payload_arrives_step_by_step(moves=['delivery', 'dispatcher', 'new delivery', 'run', 'delivery', 'dispatcher', 'dispatcher', 'delivery', 'dispatcher', 'delivery', 'delivery'], source='team member', to='worker')
        # 7. A background task delivers a message to solo's inbox (deliver_to_inbox)
        #    step by step, stopped before its first bus operation; then, one hand-off
        #    operation at a time: the wake-up dispatcher, a new delivery begins ×2 (a
        #    party that cannot move passes its move on to the next of a delivery, the
        #    run, the dispatcher that can). What is left of a delivery goes on as a
        #    movable task.
        story.payload_arrives_step_by_step(moves=['dispatcher', 'new delivery', 'new delivery'], source='background task', to='solo')
        # 8. worker's run goes on to its next turn tail.
        story.run_reaches_turn_tail(session='worker')
        # 9. A channel delivers a message to worker's inbox (deliver_to_inbox) step by
        #    step, stopped before its first bus operation; then, one hand-off operation
        #    at a time: a delivery, a new delivery begins, the wake-up dispatcher,
        #    worker's run, the wake-up dispatcher ×2 (a party that cannot move passes
        #    its move on to the next of a delivery, the run, the dispatcher that can).
        #    What is left of a delivery goes on as a movable task.
        story.payload_arrives_step_by_step(moves=['delivery', 'new delivery', 'dispatcher', 'run', 'dispatcher', 'dispatcher'], source='channel', to='worker')
        # 10. A team member delivers a message to worker's inbox (deliver_to_inbox).
        story.payload_arrives(source='team member', to='worker')

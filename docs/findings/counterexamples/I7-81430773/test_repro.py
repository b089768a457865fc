"""I7 (confirm/resume always completes): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope 2.0.11
(reference fix off). This test plays the shrunk story
step by step on a fresh world and checks I7 after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                       # against the agentscope `import agentscope` finds
    pytest test_repro.py --hitl-reference-fix  # with the harness's reference fix applied

It writes nothing; with --hitl-counterexamples DIR a failure is also written to DIR
as a counterexample folder, and the output says where.
"""
from properties.story.playback import playing


def test_I7_81430773():
    with playing(
        bus_faults=True,
        cast=['leader', 'solo'],
        crashes=False,
        enforcing=['I6', 'I7'],
        interrupts=False,
        messaged=['leader', 'solo'],
        parked_messages=False,
        sources=['team member', 'channel', 'background task'],
        turns=['calls GatedAction', 'calls ExternalJob', 'answers'],
    ) as story:
        # 1. The user sends leader a message through the chat endpoint; leader's model
        #    calls ExternalJob, which waits for an external result (SUBMITTED). The run
        #    stops at its turn tail (about to check its inbox).
        story.user_sends_message(model_turn='calls ExternalJob', session='leader')
        # 2. The external system posts the result of leader's submitted job.
        story.external_result_arrives(session='leader')
        # 3. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 4. The user sends leader a message through the chat endpoint; leader's model
        #    answers with text (no tool call). The run stops at its turn tail (about to
        #    check its inbox).
        story.user_sends_message(model_turn='answers', session='leader')
        # 5. The wake-up dispatcher's subscription drops on its next message (the
        #    connection fails).
        story.bus_operation_fails(operation='subscription to wake-up signals', session='leader')
        # 6. The user sends solo a message through the chat endpoint; solo's model calls
        #    ExternalJob, which waits for an external result (SUBMITTED). The run stops
        #    at its turn tail (about to check its inbox).
        story.user_sends_message(model_turn='calls ExternalJob', session='solo')
        # 7. The external system posts the result of solo's submitted job.
        story.external_result_arrives(session='solo')
        # 8. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()

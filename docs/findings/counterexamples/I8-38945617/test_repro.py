"""I8 (a message to a parked session is refused or reaches the agent): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope 2.0.9
(reference fix off). This test plays the shrunk story
step by step on a fresh world and checks I8 after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                       # against the agentscope `import agentscope` finds
    pytest test_repro.py --hitl-reference-fix  # with the harness's reference fix applied

It writes nothing; with --hitl-counterexamples DIR a failure is also written to DIR
as a counterexample folder, and the output says where.
"""
from properties.story.playback import playing


def test_I8_38945617():
    with playing(
        bus_faults=False,
        cast=['leader', 'solo'],
        crashes=False,
        enforcing=['I19', 'I8'],
        interrupts=False,
        messaged=['leader', 'solo'],
        parked_messages=True,
        sources=['team member', 'channel', 'background task'],
        turns=['calls GatedAction', 'calls ExternalJob', 'answers'],
    ) as story:
        # 1. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 2. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 3. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()
        # 4. The user sends leader a message through the chat endpoint; leader's model
        #    calls GatedAction, which waits for the user's confirmation (ASKING). The
        #    run stops at its turn tail (about to check its inbox).
        story.user_sends_message(model_turn='calls GatedAction', session='leader')
        # 5. The user sends solo a message through the chat endpoint; solo's model calls
        #    ExternalJob, which waits for an external result (SUBMITTED). The run stops
        #    at its turn tail (about to check its inbox).
        story.user_sends_message(model_turn='calls ExternalJob', session='solo')
        # 6. Task `chat-run:solo` takes one step (up to its next bus operation).
        story.one_task_takes_a_step(task='chat-run:solo')
        # 7. leader's run goes on to its next turn tail.
        story.run_reaches_turn_tail(session='leader')
        # 8. While leader waits for its pending tool call, the user sends leader a new
        #    message through the chat endpoint.
        story.user_messages_parked_session(session='leader', via='chat endpoint')
        # 9. Everything runs to its end, with virtual time passing as needed.
        story.everything_settles()

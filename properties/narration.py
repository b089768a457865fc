"""A story step in words: what a maintainer reads in a counterexample.

Each rule of :class:`~properties.machine.HitlMachine` has one sentence
here, filled with the step's arguments, so a shrunk program reads as the
story that broke agentscope ("The user messages worker; worker's model
calls GatedAction, which waits for the user's confirmation (ASKING)").
"""
from __future__ import annotations

from collections.abc import Callable

from harness.cast import TEAM_OF as _LEADER_OF

#: What a model turn does, in words.
_TURN_WORDS = {
    "calls GatedAction": "calls GatedAction, which waits for the user's confirmation (ASKING)",
    "calls ExternalJob": "calls ExternalJob, which waits for an external result (SUBMITTED)",
    "answers": "answers with text (no tool call)",
    "fails": "call fails (the model raises: an injected fault)",
    "starts a background job": (
        "calls BackgroundJob, a long job (allowed; after 10 seconds agentscope moves "
        "it to the background and tells the model so)"
    ),
    "calls several tools": (
        "calls four tools at once: two BatchGatedAction calls and a BatchExternalJob "
        "(which park together: ASKING, ASKING, SUBMITTED) and a ForbiddenAction "
        "(denied by policy)"
    ),
}


#: Where a new run stops, in a story's words; on a machine whose model
#: calls pause mid-answer (``streaming``), each reads as its replacement.
_AT_TURN_TAIL = "The run stops at its turn tail (about to check its inbox)."
_SPAWNED_TAKE_A_TURN = "(spawned runs take their first turn)"
_STREAMING = {
    _AT_TURN_TAIL: "The run stops while its model is still answering (mid-stream).",
    _SPAWNED_TAKE_A_TURN: "(spawned runs stop while their model is answering)",
}


def _turn(turn: str) -> str:
    return _TURN_WORDS.get(turn, turn)


_SENTENCES: dict[str, Callable[..., str]] = {
    "leader_invites_worker": lambda worker_first_turn: (
        "The user asks the leader for help; the leader's model calls AgentInvite, "
        "which creates the worker's session and delivers the task to its inbox. "
        f"The worker's model, when it runs, {_turn(worker_first_turn)}."
    ),
    "leader_invites_member": lambda member, first_turn: (
        f"The user asks the {_LEADER_OF.get(member, 'leader')} for help; its model calls "
        f"AgentInvite for the {member}, which creates the {member}'s session in that "
        f"team and delivers the task to its inbox. The {member}'s model, when it "
        f"runs, {_turn(first_turn)}."
    ),
    "background_job_finishes": lambda session: (
        f"{session}'s oldest running background job finishes (if agentscope moved it "
        "to the background, its deliverer queues the result in the inbox and wakes the "
        "session)."
    ),
    "user_sends_message": lambda session, model_turn: (
        f"The user sends {session} a message through the chat endpoint; "
        f"{session}'s model {_turn(model_turn)}. "
        + (
            "The run waits for the job."
            if model_turn == "starts a background job"
            else _AT_TURN_TAIL
        )
    ),
    "user_answers_confirmation": lambda session, decision, posted_to_leader: (
        f"The user {decision} {session}'s pending tool call"
        + (f" from the {_LEADER_OF[session]}'s session (agentscope routes it to the {session})" if posted_to_leader and session in _LEADER_OF else "")
        + "."
    ),
    "user_messages_parked_session": lambda session, via: (
        f"While {session} waits for its pending tool call, the user sends "
        f"{session} a new message "
        + ("through the chat endpoint." if via == "chat endpoint" else "from a channel (the gateway queues a `message` trigger).")
    ),
    "process_crashes": lambda session: (
        f"The process running {session}'s run dies (no cleanup runs; its "
        "session lock and inbox registration stay until their leases expire)."
    ),
    "bus_operation_fails": lambda operation, session: (
        f"The next `{operation.split()[0]}` on {session}'s "
        f"{' '.join(operation.split()[1:])} fails (the bus connection drops)."
    ),
    "external_result_arrives": lambda session: (
        f"The external system posts the result of {session}'s submitted job."
    ),
    "user_interrupts": lambda session: (
        f"The user presses stop on {session} (agentscope's interrupt route: "
        "a run holding the session lock is cancelled through the cancel "
        "dispatcher, otherwise a resume carrying the interrupt is queued)."
    ),
    "payload_arrives": lambda source, to: (
        f"A {source} delivers a message to {to}'s inbox (deliver_to_inbox)."
    ),
    "run_reaches_turn_tail": lambda session: (
        f"{session}'s run goes on to its next turn tail."
    ),
    "run_continues": lambda session: (
        f"{session}'s run goes on until it ends or must wait."
    ),
    "dispatcher_processes_queue": lambda: (
        f"The wake-up dispatcher drains its trigger queue {_SPAWNED_TAKE_A_TURN}."
    ),
    "one_task_takes_a_step": lambda task: (
        f"Task `{task}` takes one step (up to its next bus operation)."
    ),
    "time_passes": lambda seconds: f"{seconds:g} virtual seconds pass.",
    "everything_settles": lambda: (
        "Everything runs to its end, with virtual time passing as needed."
    ),
    "teardown": lambda: (
        "The story ends: the world settles (for liveness, past every lease) "
        "and is checked."
    ),
}


def narrate(rule: str, arguments: dict, streaming: bool = False) -> str:
    """One sentence for one step (the call itself for an unknown rule);
    ``streaming``: the story's machine stops new runs mid-answer."""
    text = _sentence(rule, arguments)
    for plain, mid_stream in _STREAMING.items() if streaming else ():
        text = text.replace(plain, mid_stream)
    return text


def _sentence(rule: str, arguments: dict) -> str:
    sentence = _SENTENCES.get(rule)
    if sentence is None:
        rendered = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"{rule}({rendered})"
    return sentence(**arguments)

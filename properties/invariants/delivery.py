"""Delivery: what was sent reaches the agent, once, and a refusal says
why truly (I5, I8, I14, I15, I19, I20)."""
from __future__ import annotations

from fakes.tool_desk import job_output
from harness.world.observation import Observation

from ..ledger import Ledger
from ..violation import Broken
from .words import excerpt, is_error_end, markers_in


def payloads_delivered_once_in_order(
    obs: Observation,
    ledger: Ledger,
) -> None:
    """I5: once settled and unparked, every delivered payload is in the
    agent's context exactly once, in delivery order (of two deliveries
    that overlapped, either may arrive first).

    Only meaningful when the world has settled: before that a payload may
    legitimately still be on its way. A session a fault touched (a crash,
    a failed bus operation) is I11's to judge: whether what waits is
    eventually consumed once the leases run out."""
    if not obs.settled:
        return
    for alias, markers in ledger.delivered.items():
        view = obs.sessions.get(alias)
        if view is None or view.parked_status != "idle" or alias in ledger.faults:
            continue
        seen = [h for h in view.context_hints if h in set(markers)]
        if sorted(seen) != sorted(markers) or ledger.out_of_order(alias, seen):
            raise Broken(
                f"{alias}'s context holds {markers}",
                f"{alias}'s context holds {seen}; still queued: "
                f"{markers_in(view.queued)}",
            )


def parked_messages_reach_the_agent(obs: Observation, ledger: Ledger) -> None:
    """I8: a message the user sends while the agent is parked is refused
    up front (409) or reaches the agent; it is never accepted and dropped.

    A parked agent cannot take a new message before its pending calls are
    answered. Refusing it tells the user; keeping it for after the resume
    loses nothing (it waits in the inbox, and the resuming run gives it to
    the agent as a hint, as agentscope does with a channel message that
    finds a reply in flight); accepting it and then failing the run leaves
    the user with an error about the agent's setup and a message the agent
    never saw. Checked once settled (before that the message may be on its
    way)."""
    if not obs.settled:
        return
    for alias, messages in ledger.parked_messages.items():
        view = obs.sessions.get(alias)
        if view is None:
            continue
        waiting = " ".join(markers_in(view.queued))
        hinted = " ".join(view.context_hints)
        for marker, refused in messages:
            if refused or marker in view.context_user_texts or marker in hinted or marker in waiting:
                continue
            errors = [e for e in view.events if is_error_end(e)]
            detail = (errors[-1].get("error") or {}) if errors else {}
            raise Broken(
                f"{alias}'s endpoint refuses {marker!r}, or {alias}'s agent "
                "gets it (now or after the resume)",
                f"accepted, but not in {alias}'s context nor queued; "
                f"{len(errors)} ReplyEnd(ERROR) published"
                + (f", the last: {detail.get('type', '?')}: {detail.get('message', '')}" if errors else ""),
            )


def background_results_delivered(obs: Observation, ledger: Ledger) -> None:
    """I14: once settled and unparked, the output of every background job
    that finished is in the agent's context exactly once: as its call's
    result, or as the completion notice agentscope queues in the inbox.

    A job the agent started and nobody stopped is work the user paid for;
    a result that reaches nobody leaves the agent believing it is still
    running (or that it was interrupted) while its effects happened."""
    if not obs.settled:
        return
    for alias, notes in ledger.jobs_finished.items():
        view = obs.sessions.get(alias)
        if view is None or view.parked_status != "idle":
            continue
        for note in notes:
            output = job_output(note)
            seen = sum(
                text.count(output)
                for text in (*view.context_tool_outputs, *view.context_hints)
            )
            if seen != 1:
                raise Broken(
                    f"{output!r} is in {alias}'s context once",
                    f"it is there {seen} times ({len(view.queued)} payload(s) "
                    f"still queued for {alias})",
                )


def refused_only_while_busy(obs: Observation, ledger: Ledger) -> None:
    """I15: the chat endpoint refuses (409) a user's message only while a
    run of that session is in flight, or while the session is parked on a
    call that awaits the user (a confirmation or an external result, as
    stored).

    A refusal is the user's only news that the message went nowhere; a
    refusal with nothing in flight and nothing to answer turns a working
    session away. A parked agent cannot take a new message (it waits for
    the answer), so a refusal then tells the user what to do."""
    del obs
    for alias, refused, busy, parked, _ in ledger.messages:
        if refused and not busy and not parked and alias not in ledger.faults:
            raise Broken(
                f"{alias}'s endpoint accepts a message while no run of {alias} "
                "is in flight and nothing awaits the user",
                "it answered 409 with no run in flight and no call awaiting",
            )


#: What a refusal says when it claims the session waits for its user.
WAITS_FOR_ANSWER = "waiting for the answer"


def refusals_tell_the_truth(obs: Observation, ledger: Ledger) -> None:
    """I19: a refusal's reason matches the session's state when it was
    sent: "waiting for the answer" only while the session is parked on a
    call (as stored) and no run of it is in flight; any other refusal (a
    run in flight) only while a run is.

    agentscope's chat route documents its 409 as the guard against a second
    run in flight; a refusal that says something else must be true too, or
    the user is told to answer a card that is already answered."""
    del obs
    for alias, refused, busy, parked, reason in ledger.messages:
        if not refused or alias in ledger.faults:
            continue
        claims_parked = WAITS_FOR_ANSWER in reason
        if (claims_parked and (busy or not parked)) or (not claims_parked and not busy):
            state = ("a run in flight" if busy else "no run in flight") + (", parked" if parked else ", not parked")
            raise Broken(
                f"the refusal of {alias}'s message says what {alias} is doing",
                f"it said {excerpt(reason, 90)!r} with {state}",
            )


def accepted_messages_stay_the_users(obs: Observation, ledger: Ledger) -> None:
    """I20: once settled, a message accepted while the session was parked
    (through the chat endpoint or a channel) is in the agent's context as
    the user's message, or still waits for the resume; it is never turned
    into something else (a hint on the agent's own turn, which nobody
    answers) nor dropped.

    The promise of ``enqueue_run_trigger``'s ``message`` kind: a user's
    message is reasoned over "as a real user turn", and answered."""
    if not obs.settled:
        return
    for alias, messages in ledger.parked_messages.items():
        view = obs.sessions.get(alias)
        if view is None or alias in ledger.faults:
            continue
        waiting = " ".join(markers_in(view.queued)) if view.parked_status != "idle" else ""
        for marker, refused in messages:
            if refused or any(marker in text for text in view.context_user_texts) or marker in waiting:
                continue
            hinted = any(marker in hint for hint in view.context_hints)
            raise Broken(
                f"{alias}'s accepted message {marker!r} reaches the agent as the user's message",
                "it is in the context only as a hint" if hinted else "it is nowhere in the context",
            )

"""The words stories are told in: what a model turn does, where a payload
comes from, how long time passes, which bus operation may fail.

Rule arguments are these plain strings, so a shrunk program reads as the
story (``model_turn='calls GatedAction'``) and ``story.json`` stays data.
"""
from __future__ import annotations

from agentscope.app.message_bus import MessageBusKeys

from harness.world.surface import ABSENT, CHANNEL_MESSAGE, INBOX

from fakes.model import CallTool, CallTools, Fail, Turn
from fakes.tool_desk import BACKGROUND_JOB, BATCH_EXTERNAL_JOB, BATCH_GATED_ACTION

#: What a model's next turn does, as a story says it.
TURNS = ("calls GatedAction", "calls ExternalJob", "answers")

#: The turns that park a run on a call (a card, a submitted job): F1's
#: windows (a payload in a parked turn's tail, a resumed turn) need one.
PARKING_TURNS = ("calls GatedAction", "calls ExternalJob")

#: A turn whose model call raises: an injected fault (only machines that
#: list it in ``turns`` script it).
FAILS = "fails"

#: A turn with several calls at once: two that ask the user, one external
#: job (these three park together) and one the policy denies.
SEVERAL_CALLS = "calls several tools"

#: A turn whose call runs long: a background job, which agentscope moves
#: to the background after 10 seconds.
BACKGROUND = "starts a background job"

#: Where an inbox payload comes from.
SOURCES = ("team member", "channel", "background task")

#: How the user may write to a parked session: through the chat endpoint,
#: and from a channel where the release's wake-up queue takes its message.
PARKED_MESSAGE_WAYS = ("chat endpoint",) + (() if CHANNEL_MESSAGE in ABSENT else ("channel",))

#: Virtual seconds that may pass in one step: a dispatcher backoff, an
#: inbox-lock lease, a session-run lease.
DURATIONS = (0.1, 31.0, 601.0)

#: Longer than every lease and TTL agentscope sets (the session lock and the
#: inbox-consumer registration: 600 s).
PAST_EVERY_LEASE = 601.0

#: Bus operations a story may make fail, each on one session's key, as a
#: dropped Redis connection fails them: (how, operation, key). ``before``:
#: the call never reaches the server; ``after``: the server applied it and
#: the reply is lost; ``renewal``: the live lock's heartbeat fails, and with
#: it the lease, under its holder; ``release``: the holder's release fails
#: (RedisMessageBus swallows it) and the lock stays until its lease runs out.
#: A subscription drops on its next message (a channel, not a session key:
#: the fault touches no session). ``overtake`` is not a failure but a timing
#: Redis allows: a waiter polls for a freed lock, so another may take it
#: first.
BUS_FAULTS = {
    "is_locked session lock": ("before", "is_locked", MessageBusKeys.session_lock),
    "log_append session events": ("before", "log_append", MessageBusKeys.session_events),
    "queue_drain inbox": ("before", "queue_drain", MessageBusKeys.inbox),
    "queue_drain inbox, after it applied": ("after", "queue_drain", MessageBusKeys.inbox),
    "publish session events": ("before", "publish", MessageBusKeys.session_events),
    "renewal of session lock": ("renewal", "renewal", MessageBusKeys.session_lock),
    "release of session lock": ("release", "release_lock", MessageBusKeys.session_lock),
    "waiter on session lock, overtaken": ("overtake", "acquire_lock", MessageBusKeys.session_lock),
    "subscription to wake-up signals": (
        "before",
        "subscription",
        lambda _session_id: MessageBusKeys.wakeup_signal(),
    ),
}
if INBOX.consumer_key is not None:  # a release with the consumer registration
    BUS_FAULTS["registry_del inbox consumer"] = (
        "before",
        "registry_del",
        lambda session_id: f"{INBOX.consumer_key(session_id)}#running",
    )

#: How each kind of bus fault reads in a report.
BUS_FAULT_WORDS = {
    "before": "fails (the bus connection drops before the server gets it)",
    "after": "fails after the server applied it (the reply is lost)",
    "renewal": "fails: its lease is no longer renewed and runs out under its live holder",
    "release": "fails on the holder's next release: the lock stays until its lease runs out",
    "overtake": (
        "is slow: the next run woken to take it polls once (0.1 s) first, so another "
        "may take it before"
    ),
}


def scripted_turns(alias: str, turn: str, tag: str = "") -> list[Turn]:
    """The scripted model turn(s) for ``turn``; ``tag`` makes each call's
    note unique, so the desk can tell which call ran."""
    if turn == "calls GatedAction":
        return [CallTool("GatedAction", {"note": f"{alias} {tag} needs approval"})]
    if turn == "calls ExternalJob":
        return [CallTool("ExternalJob", {"note": f"{alias} {tag} hands off a job"})]
    if turn == FAILS:
        return [Fail(f"{alias}'s model is unavailable")]
    if turn == BACKGROUND:
        return [CallTool(BACKGROUND_JOB, {"note": f"{alias} {tag} job"})]
    if turn == SEVERAL_CALLS:
        return [
            CallTools(
                (
                    CallTool(BATCH_GATED_ACTION, {"note": f"{alias} {tag} change A"}),
                    CallTool(BATCH_GATED_ACTION, {"note": f"{alias} {tag} change B"}),
                    CallTool(BATCH_EXTERNAL_JOB, {"note": f"{alias} {tag} job C"}),
                    CallTool("ForbiddenAction", {"note": f"{alias} {tag} forbidden D"}),
                ),
            ),
        ]
    return []  # the script's own ending: text, or a report for a worker


# ── the same words, for a person ──────────────────────────────────────

#: What a model turn does, in words.
TURN_WORDS = {
    "calls GatedAction": "calls GatedAction, which waits for the user's confirmation (ASKING)",
    "calls ExternalJob": "calls ExternalJob, which waits for an external result (SUBMITTED)",
    "answers": "answers with text (no tool call)",
    FAILS: "call fails (the model raises: an injected fault)",
    BACKGROUND: (
        "calls BackgroundJob, a long job (allowed; after 10 seconds agentscope moves "
        "it to the background and tells the model so)"
    ),
    SEVERAL_CALLS: (
        "calls four tools at once: two BatchGatedAction calls and a BatchExternalJob "
        "(which park together: ASKING, ASKING, SUBMITTED) and a ForbiddenAction "
        "(denied by policy)"
    ),
}


def turn_in_words(turn: str) -> str:
    return TURN_WORDS.get(turn, turn)


#: Where a new run stops, in a story's words; on a machine whose model
#: calls pause mid-answer (``streaming``), each reads as its replacement
#: in :data:`MID_ANSWER`.
AT_TURN_TAIL = f"The run stops at its turn tail ({INBOX.at_turn_tail})."
SPAWNED_TAKE_A_TURN = "(spawned runs take their first turn)"
MID_ANSWER = {
    AT_TURN_TAIL: "The run stops while its model is still answering (mid-stream).",
    SPAWNED_TAKE_A_TURN: "(spawned runs stop while their model is answering)",
}


def on(node: int | None) -> str:
    """Which node an action happened on, as a report says it (nothing in
    a one-node story)."""
    return "" if node is None else f" on node {node}"

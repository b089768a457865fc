"""The user: messages, answers to confirmation cards, the stop button; and
the external system that posts a submitted job's result.

Everything the user does enters through agentscope's own routes (the chat
endpoint, the interrupt route). :class:`UserRules` are in every story;
:class:`Interrupts`, :class:`CleanUpStops` and :class:`ParkedMessages` only
on machines whose flag turns them on.
"""
from __future__ import annotations

import json

from agentscope.event import ConfirmResult, ExternalExecutionResultEvent, UserConfirmResultEvent
from agentscope.message import ToolCallBlock, ToolResultBlock, ToolResultState, UserMsg
from hypothesis import strategies as st

from harness.world.cast import TEAM_OF

from .story_rule import Chosen, OnNode, Where, story_rule
from .vocabulary import AT_TURN_TAIL, BACKGROUND, PARKED_MESSAGE_WAYS, on, turn_in_words


class UserRules:
    """A user's messages and answers, and external results."""

    @story_rule(
        when=lambda self: any(map(self.takes_messages, self.cast)),
        session=Where("takes_messages"),
        model_turn=Chosen("turns"),
        node=OnNode(),
        says=lambda session, model_turn, node=None: (
            f"The user sends {session} a message through the chat endpoint{on(node)}; "
            f"{session}'s model {turn_in_words(model_turn)}. "
            + ("The run waits for the job." if model_turn == BACKGROUND else AT_TURN_TAIL)
        ),
    )
    def user_sends_message(self, session: str, model_turn: str, node: int | None = None) -> None:
        """A user message through the chat endpoint, which spawns a run
        directly (or answers 409 while one is in flight). The run takes its
        turn (the model does ``model_turn``) and stops at its turn tail."""
        self._send_message(session, model_turn, node)

    def _send_message(self, session: str, model_turn: str, node: int | None) -> None:
        """:meth:`user_sends_message`'s act, for rules whose stories send
        one among other steps."""
        self.script(session, model_turn)
        busy, parked = self._sending_to(session)
        with self.world.spawned_runs_take_their_turn(mid_answer=self.streaming):
            refused = self.world.user_posts(session, UserMsg(name="user", content="please help"), node or 0)
        self.ledger.message_sent(session, refused, busy, parked)

    def _sending_to(self, session: str) -> tuple[bool, bool]:
        """Whether a run of ``session`` is in flight, and whether its stored
        state is parked on a call, as a message is sent to it."""
        busy = self.world.run_of(session) is not None
        return busy, self.world.observe_session(session).parked_status != "idle"

    @story_rule(
        when=lambda self: self.any_open("REQUIRE_USER_CONFIRM"),
        session=Where("asks_confirmation"),
        decision=st.sampled_from(("confirms", "denies")),
        posted_to_leader=st.booleans(),
        node=OnNode(),
        says=lambda session, decision, posted_to_leader, node=None: (
            f"The user {decision} {session}'s pending tool call"
            + (
                f" from the {TEAM_OF[session]}'s session (agentscope routes it to the {session})"
                if posted_to_leader and session in TEAM_OF else ""
            )
            + f"{on(node)}."
        ),
    )
    def user_answers_confirmation(
        self, session: str, decision: str, posted_to_leader: bool, node: int | None = None,
    ) -> None:
        """The user answers a confirmation card. A worker's card is shown
        in the leader's session too; posted there, the endpoint routes the
        answer on to the worker."""
        ask, calls = self._answer(session, "REQUIRE_USER_CONFIRM")
        for call in calls:
            note = json.loads(call.input or "{}").get("note", "")
            self.ledger.confirm(session, call.id, note, decision == "confirms")
        answer = UserConfirmResultEvent(
            reply_id=ask["reply_id"],
            confirm_results=[
                ConfirmResult(confirmed=decision == "confirms", tool_call=call)
                for call in calls
            ],
        )
        post_to = TEAM_OF.get(session, session) if posted_to_leader else session
        self.world.user_posts(post_to, answer, node or 0)

    @story_rule(
        when=lambda self: self.any_open("REQUIRE_EXTERNAL_EXECUTION"),
        session=Where("awaits_result"),
        node=OnNode(),
        says=lambda session, node=None: (
            f"The external system posts the result of {session}'s submitted job{on(node)}."
        ),
    )
    def external_result_arrives(self, session: str, node: int | None = None) -> None:
        """The external system posts the result of a submitted job."""
        ask, calls = self._answer(session, "REQUIRE_EXTERNAL_EXECUTION")
        result = ExternalExecutionResultEvent(
            reply_id=ask["reply_id"],
            execution_results=[
                ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output="the job finished",
                    state=ToolResultState.SUCCESS,
                )
                for call in calls
            ],
        )
        self.world.user_posts(session, result, node or 0)

    def _answer(self, session: str, kind: str) -> tuple[dict, list[ToolCallBlock]]:
        """The open request of ``kind`` and its calls, recorded as answered
        in the ledger (the caller posts the answer)."""
        ask = self.open_request(session, kind)
        calls = [ToolCallBlock.model_validate(c) for c in ask["tool_calls"]]
        for call in calls:
            self.ledger.decide(session, call.id)
        return ask, calls


class Interrupts:
    """The stop button (machines with ``interrupts``)."""

    @story_rule(
        when=lambda self: any(map(self.interruptible, self.cast)),
        session=Where("interruptible"),
        node=OnNode(),
        says=lambda session, node=None: (
            f"The user presses stop on {session}{on(node)} (agentscope's interrupt route: "
            "a run holding the session lock is cancelled through the cancel "
            "dispatcher, otherwise a resume carrying the interrupt is queued)."
        ),
    )
    def user_interrupts(self, session: str, node: int | None = None) -> None:
        """The user presses stop: agentscope's interrupt route, which publishes
        on the interrupt channel while a run holds the session lock (the cancel
        dispatcher then cancels the run) and otherwise queues a resume trigger
        carrying the interrupt (the wake-up dispatcher runs it). Sent while a
        run is alive or the session is parked; recorded in the ledger with what
        the session was doing at that moment."""
        self.ledger.interrupt(self.world.observe_session(session))
        self.world.user_presses_stop(session, node or 0)


class CleanUpStops:
    """The stop button pressed while a run saves its state (machines with
    ``clean_up_stops``): after the turn tail, where no agent code sees it."""

    @story_rule(
        when=lambda self: self.any_run(),
        session=Where("has_run"),
        says=lambda session: (
            f"{session}'s run goes on past its turn tail until its clean-up saves its state; "
            f"the user presses stop on {session} while the run waits for the save."
        ),
    )
    def user_interrupts_clean_up(self, session: str) -> None:
        """The session's run goes on until its clean-up saves its state
        (just before the save trims the session's event log), and the user
        presses stop then, through agentscope's interrupt route (if the run
        ended or must wait elsewhere first, the stop reaches what is
        there). Recorded in the ledger as any stop."""
        self.world.run_to_clean_up(session)
        self.ledger.interrupt(self.world.observe_session(session))
        self.world.user_presses_stop(session)


class ParkedMessages:
    """Messages to a session that waits for its user (machines with
    ``parked_messages``)."""

    @story_rule(
        when=lambda self: any(map(self.writable_while_parked, self.cast)),
        session=Where("writable_while_parked"),
        via=st.sampled_from(PARKED_MESSAGE_WAYS),
        node=OnNode(),
        says=lambda session, via, node=None: (
            f"While {session} waits for its pending tool call, the user sends "
            f"{session} a new message "
            + (
                f"through the chat endpoint{on(node)}." if via == "chat endpoint"
                else f"from a channel (the gateway queues a `message` trigger{on(node)})."
            )
        ),
    )
    def user_messages_parked_session(self, session: str, via: str, node: int | None = None) -> None:
        """The user writes to a session whose agent waits for a confirmation
        or an external result, as a real client can: through the chat
        endpoint (a direct run, or 409 while a run is still registered), or
        from a channel, whose gateway queues a ``message`` trigger for the
        dispatcher when no run holds the session (while one does, the
        gateway delivers a hint instead: that is ``payload_arrives``)."""
        marker = f"message-{self.next_marker()} while parked"
        message = UserMsg(name="user", content=marker)
        if via == "chat endpoint":
            busy, parked = self._sending_to(session)
            refused = self.world.user_posts(session, message, node or 0)
            self.ledger.message_sent(session, refused, busy, parked)
        elif self.world.run_of(session) is None:
            refused = False
            self.world.channel_posts(session, message, node or 0)
        else:
            return
        self.ledger.message_while_parked(session, marker, bool(refused))

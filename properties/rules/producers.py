"""Producers: a team member, a channel or a background task hands a
payload to a session's inbox through agentscope's ``deliver_to_inbox`` (on
2.0.3-2.0.6, as their producers did: push, then queue a wake-up)."""
from __future__ import annotations

import json

from agentscope.message import HintBlock
from hypothesis import strategies as st

from harness.world.surface import INBOX

from .story_rule import Chosen, OnNode, Where, story_rule
from .vocabulary import on, turn_in_words


#: What a delivery's rule chooses: where the payload comes from, whose
#: inbox it lands in, and (with several nodes) which node serves it.
DELIVERY = dict(source=Chosen("sources"), to=Where("exists", favour="has_run"), node=OnNode())


class ProducerRules:
    """Payloads arriving in an inbox."""

    @story_rule(
        **DELIVERY,
        says=lambda source, to, node=None: (
            f"A {source}{on(node)} delivers a message to {to}'s inbox ({INBOX.hand_off})."
        ),
    )
    def payload_arrives(self, source: str, to: str, node: int | None = None) -> None:
        """A team message, a channel message or a background-task result
        lands in a session's inbox through the release's hand-off."""
        self._deliver(source, to, node)

    def _deliver(
        self, source: str, to: str, node: int | None, wake_late: bool = False, held: bool = False,
    ) -> None:
        marker = f"payload-{self.next_marker()} from {source}"
        hint = HintBlock(
            hint=marker,
            source=json.dumps({"label": source, "sublabel": "harness"}),
        )
        self.ledger.deliver(to, marker, self.world.deliveries_in_flight())
        self.world.deliver(to, hint.model_dump(mode="json"), source, node or 0, wake_late, held, marker=marker)


class LateWakeups:
    """Deliveries whose wake-up lands late (flag ``late_wakeups``).

    On Redis a delivery is several round trips: the producer pushes,
    checks for a consumer under the inbox lock, releases it, and only then
    queues the wake-up it owes when it found none. A run can start in
    between (the window ``producer-check-then-act``); here the producer
    stops just before that wake-up, and goes on as any movable task.
    """

    @story_rule(
        **DELIVERY,
        says=lambda source, to, node=None: (
            f"A {source}{on(node)} delivers a message to {to}'s inbox ({INBOX.hand_off}); "
            "if it owes a wake-up, it stops just before queueing it."
        ),
    )
    def payload_arrives_wakeup_late(self, source: str, to: str, node: int | None = None) -> None:
        """A delivery whose wake-up is still to come."""
        self._deliver(source, to, node, wake_late=True)


#: Who moves in a step-by-step delivery: the deliveries to the session
#: (the oldest that can move: its next bus operation), the session's run
#: or the wake-up dispatcher (each up to and through its next operation of
#: that session's hand-off); a party that cannot move passes its move on
#: to the next of these that can. Or a new delivery begins (from the same
#: source, stopped before its first bus operation).
MOVING = ("delivery", "run", "dispatcher")
STEP_PARTIES = (*MOVING, "new delivery")


#: The aimed rule's moves: a few of any party (a wake-up queued, a
#: dispatcher's pop), then the run ``k`` operations into its turn-tail
#: check (none to five: lock, a drain until one comes back empty, the
#: put-back, the release), one party's move or two there, the run's next
#: operation right after, and a few more of any party. One move of
#: another party between two of the check's operations is the race; drawn
#: a move at a time, the run's four in a row came once in 256 draws.
def _into_the_check(drawn: tuple[list[str], int, str, int, list[str]]) -> list[str]:
    before, run_moves, party, party_moves, after = drawn
    return [*before, *["run"] * run_moves, *[party] * party_moves, "run", *after]


INTO_THE_CHECK = st.tuples(
    st.lists(st.sampled_from(STEP_PARTIES), max_size=3), st.integers(0, 5),
    st.sampled_from(STEP_PARTIES), st.integers(1, 2), st.lists(st.sampled_from(STEP_PARTIES), max_size=6),
).map(_into_the_check)


def _moves_in_words(to: str, moves: list[str]) -> str:
    """``moves`` as a story says them, a party's consecutive moves as one
    (``solo's run ×3``)."""
    party = {"delivery": "a delivery", "new delivery": "a new delivery begins", "run": f"{to}'s run",
             "dispatcher": "the wake-up dispatcher"}
    runs: list[list] = []
    for move in moves:
        if runs and runs[-1][0] == move:
            runs[-1][1] += 1
        else:
            runs.append([move, 1])
    return ", ".join(party[m] + (f" ×{n}" if n > 1 else "") for m, n in runs)


class StepwiseDeliveries:
    """Deliveries interleaved with a run and the dispatcher one hand-off
    operation at a time (flag ``stepwise_deliveries``).

    :meth:`ProducerRules.payload_arrives` runs a delivery to its end in one
    step, so no other party ever moves inside its critical section (the
    inbox lock, the push, the registry read, the release): on Redis those
    are separate round trips. Here the delivery stops before its first bus
    operation; then the deliveries to the session (an older one still
    under way, such as a late wake-up's, first while it can move; this one;
    more that begin on the way), its run and the wake-up dispatcher move in the drawn order,
    each by one operation of the hand-off (docs/reach.md counts the orders
    this reaches): a second delivery's critical section meets the run that
    the first one's wake-up had the dispatcher spawn. Whatever is
    left of a delivery goes on as any movable task.
    """

    @story_rule(
        **DELIVERY,
        moves=st.lists(st.sampled_from(STEP_PARTIES), min_size=3, max_size=24),
        says=lambda source, to, moves, node=None: (
            f"A {source}{on(node)} delivers a message to {to}'s inbox ({INBOX.hand_off}) step by step, "
            f"stopped before its first bus operation; then, one hand-off operation at a time: "
            f"{_moves_in_words(to, moves)} (a party that cannot move passes its move on to the next "
            "of a delivery, the run, the dispatcher that can). What is left of a delivery goes on "
            "as a movable task."
        ),
    )
    def payload_arrives_step_by_step(
        self, source: str, to: str, moves: list[str], node: int | None = None,
    ) -> None:
        """A delivery whose bus operations interleave with the receiving
        session's run, the dispatcher and the other deliveries under way."""
        self._deliver(source, to, node, held=True)
        self._move(source, to, moves, node)

    @story_rule(
        when=lambda self: any(map(self.takes_messages_with_no_run, self.cast)),
        source=Chosen("sources"),
        to=Where("takes_messages_with_no_run"),
        model_turn=Chosen("turns"),
        moves=INTO_THE_CHECK,
        node=OnNode(),
        says=lambda source, to, model_turn, moves, node=None: (
            f"Two {source} deliveries{on(node)} to {to}'s inbox find no consumer and stop just before "
            f"queueing the wake-ups they owe; the user sends {to} a message{on(node)}, whose run takes "
            f"them in and its turn ({to}'s model {turn_in_words(model_turn)}) and stops at its turn tail; "
            f"a third delivery lands in one step. Then, one hand-off operation at a time: "
            f"{_moves_in_words(to, moves)} (a party that cannot move passes its move on)."
        ),
    )
    def wakeups_outlast_a_turn(
        self, source: str, to: str, model_turn: str, moves: list[str], node: int | None = None,
    ) -> None:
        """Wake-ups still owed while the run they were for checks its
        inbox: the deliveries read no registration before the run
        registered, and the run found a later payload at its turn tail.
        The producer's wake-up and the dispatcher's pop and probe then meet
        the check's drain, put-back and release (docs/reach.md), which a
        story of the other rules reaches only in about twenty drawn moves."""
        self._deliver(source, to, node, wake_late=True)
        self._deliver(source, to, node, wake_late=True)
        self._send_message(to, model_turn, node)
        self._deliver(source, to, node)
        self._move(source, to, moves, node)

    def _move(self, source: str, to: str, moves: list[str], node: int | None) -> None:
        """Play ``moves`` on ``to``'s hand-off, each passed on to the next
        party that can move when its own cannot."""
        for party in moves:
            if party == "new delivery":
                self._deliver(source, to, node, held=True)
                continue
            turn = MOVING.index(party)
            for passed_to in MOVING[turn:] + MOVING[:turn]:
                if self.world.hand_off_step(to, passed_to, node or 0):
                    break

    def _check(self, obs) -> None:
        """Check as every machine does, once the ledger's deliveries are in
        the order their payloads reached the inbox: a delivery held before
        its push is overtaken by later ones, and the inbox's arrival order
        is the delivery order the hand-off keeps (I5). Deliveries still
        under way keep the order they began in, after those."""
        for alias, markers in self.ledger.delivered.items():
            arrived: dict[str, int] = {}
            for pushed in self.world.inbox_pushes(alias):
                arrived.setdefault(pushed.removeprefix("hint "), len(arrived))
            markers.sort(key=lambda m: (m not in arrived, arrived.get(m, 0)))
        super()._check(obs)  # the machine's own (HitlMachine._check)

"""Producers: a team member, a channel or a background task hands a
payload to a session's inbox through agentscope's ``deliver_to_inbox`` (on
2.0.3-2.0.6, as their producers did: push, then queue a wake-up)."""
from __future__ import annotations

import json

from agentscope.message import HintBlock

from harness.world.surface import INBOX

from .story_rule import Chosen, OnNode, Where, story_rule
from .vocabulary import on


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

    def _deliver(self, source: str, to: str, node: int | None, wake_late: bool = False) -> None:
        marker = f"payload-{self.next_marker()} from {source}"
        hint = HintBlock(
            hint=marker,
            source=json.dumps({"label": source, "sublabel": "harness"}),
        )
        self.ledger.deliver(to, marker)
        self.world.deliver(to, hint.model_dump(mode="json"), source, node or 0, wake_late)


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

"""Producers: a team member, a channel or a background task hands a
payload to a session's inbox through agentscope's ``deliver_to_inbox`` (on
2.0.3-2.0.6, as their producers did: push, then queue a wake-up)."""
from __future__ import annotations

import json

from agentscope.message import HintBlock

from harness.world.surface import INBOX

from .story_rule import Chosen, OnNode, Where, story_rule
from .vocabulary import on


class ProducerRules:
    """Payloads arriving in an inbox."""

    @story_rule(
        source=Chosen("sources"),
        to=Where("exists"),
        node=OnNode(),
        says=lambda source, to, node=None: (
            f"A {source}{on(node)} delivers a message to {to}'s inbox ({INBOX.hand_off})."
        ),
    )
    def payload_arrives(self, source: str, to: str, node: int | None = None) -> None:
        """A team message, a channel message or a background-task result
        lands in a session's inbox through the release's hand-off."""
        marker = f"payload-{self.next_marker()} from {source}"
        hint = HintBlock(
            hint=marker,
            source=json.dumps({"label": source, "sublabel": "harness"}),
        )
        self.ledger.deliver(to, marker)
        self.world.deliver(to, hint.model_dump(mode="json"), source, node or 0)

"""Deterministic ids and timestamps, through agentscope's public hooks.

Entity ids default to ``uuid4`` and timestamps to ``datetime.now()``;
``agentscope.set_id_factory`` and ``agentscope.set_timestamp_factory``
(every release from 2.0.6 on; before, only the first) replace both
without patching anything.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import agentscope


@dataclass
class IdCounter:
    """Hands out ids ``<story><count>000…`` (32 hex characters).

    The story number keeps ids unique in storage shared by many stories;
    the count comes early because agentscope derives an agent's invite
    handle from the first eight characters of its id.
    """

    story: int = 0
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def __call__(self) -> str:
        return f"{self.story:06x}{next(self.counter):06x}".ljust(32, "0")


def install_deterministic_factories(
    timestamp: Callable[[], str],
    story: int = 0,
) -> IdCounter:
    """Make agentscope's ids count up and its timestamps read
    ``timestamp()`` (the virtual clock's).

    Both hooks are process-wide. They cover entity ids and content-block
    timestamps; some releases still stamp events and storage records with
    ``datetime.now()``, which the harness never reads.
    """
    ids = IdCounter(story)
    agentscope.set_id_factory(ids)
    # 2.0.5 and older have no timestamp hook: their content blocks read the
    # wall clock, which the harness never reads either.
    if hasattr(agentscope, "set_timestamp_factory"):
        agentscope.set_timestamp_factory(timestamp)
    return ids


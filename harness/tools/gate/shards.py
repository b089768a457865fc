"""``gate --shard i/n``: one CI runner's share of the releases.

Every runner resolves the same SPECs to the same list of releases (in the
order the SPECs name them, a range oldest first); shard ``i`` of ``n`` takes
every ``n``-th of them, starting with the ``i``-th, so each release falls
to exactly one shard and neighbouring releases to different ones. A
baseline is not sharded: each shard runs it (or reads it with
``--baseline-json``), and ``hitl-harness merge`` shows it once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: Most shards a gate may be split into.
MAX_SHARDS = 256


class BadShard(ValueError):
    """Text that is no ``i/n`` shard (one line)."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (from 1) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def share(self, targets: list[T]) -> list[T]:
        """This shard's targets: every ``count``-th, from the ``index``-th."""
        return targets[self.index - 1::self.count]


def parse(text: str) -> Shard:
    """``"2/3"`` as a :class:`Shard`, or :class:`BadShard`."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if found is None:
        raise BadShard(f"{text!r} is not a shard: write i/n, e.g. 1/3")
    index, count = int(found[1]), int(found[2])
    if not 1 <= count <= MAX_SHARDS:
        raise BadShard(f"{text!r}: the number of shards must be 1 to {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise BadShard(f"{text!r}: the shard must be 1 to {count}")
    return Shard(index, count)

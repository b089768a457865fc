"""What a story's world stands for: which bus, and how many processes.

``fake``: the virtual-clock fake bus (:mod:`fakes.bus`), one process.
``redis``: agentscope's own ``RedisMessageBus`` on a real redis-server
that the stage starts (:mod:`harness.kernel.redis_server`), with ``nodes``
processes' worth of agentscope sharing it and the storage, as a production
deployment runs.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BUSES = ("fake", "redis")

#: Nodes a Redis deployment has unless told otherwise.
DEFAULT_REDIS_NODES = 2


class DeploymentRefused(ValueError):
    """A bus or node count the harness cannot build, in one line."""


@dataclass(frozen=True)
class Deployment:
    """A bus and a node count."""

    bus: str = "fake"
    nodes: int = 1

    def __post_init__(self) -> None:
        if self.bus not in BUSES:
            raise DeploymentRefused(f"unknown bus {self.bus!r} (choose from {', '.join(BUSES)})")
        if self.nodes < 1:
            raise DeploymentRefused(f"nodes must be at least 1, not {self.nodes}")
        if self.bus == "fake" and self.nodes != 1:
            raise DeploymentRefused("the fake bus is one process: several nodes need the redis bus")

    @classmethod
    def of(cls, bus: str | None, nodes: int | None) -> "Deployment":
        """From command-line values (``None``: not given)."""
        bus = bus or "fake"
        if nodes is None:
            nodes = DEFAULT_REDIS_NODES if bus == "redis" else 1
        return cls(bus, nodes)

    @classmethod
    def from_options(cls, options: Sequence[str]) -> "Deployment":
        """The deployment the suite's options ``--hitl-bus B --hitl-nodes N`` select
        (either may be missing)."""
        if isinstance(options, (str, bytes)) or not all(isinstance(arg, str) for arg in options):
            raise DeploymentRefused(f"not a list of options: {options!r}")
        args = list(options)

        def value(flag: str) -> str | None:
            return args[args.index(flag) + 1] if flag in args[:-1] else None

        nodes = value("--hitl-nodes")
        try:
            count = None if nodes is None else int(nodes)
        except ValueError:
            raise DeploymentRefused(f"--hitl-nodes must be a whole number, not {nodes!r}") from None
        return cls.of(value("--hitl-bus"), count)

    @classmethod
    def from_record(cls, record: object) -> "Deployment":
        """From ``{"bus": ..., "nodes": ...}`` as a verdicts file says it."""
        if not (isinstance(record, dict) and set(record) == {"bus", "nodes"}
                and isinstance(record["bus"], str) and type(record["nodes"]) is int):
            raise DeploymentRefused(f'not {{"bus": "<name>", "nodes": <number>}}: {record!r}')
        return cls(record["bus"], record["nodes"])

    def record(self) -> dict:
        """``{"bus": ..., "nodes": ...}``, as a verdicts file says it
        (:meth:`from_record` reads it back)."""
        return {"bus": self.bus, "nodes": self.nodes}

    def options(self) -> tuple[str, ...]:
        """The suite's options that select it (none for the fake bus)."""
        return () if self == Deployment() else ("--hitl-bus", self.bus, "--hitl-nodes", str(self.nodes))

    def configuration(self) -> dict:
        """What a story records: nothing for the fake bus (stories written
        before Redis mode keep their names), the bus and nodes otherwise."""
        return {} if self.bus == "fake" else {"bus": self.bus, "nodes": self.nodes}

    @classmethod
    def from_configuration(cls, machine: dict) -> "Deployment":
        return cls(machine.get("bus", "fake"), machine.get("nodes", 1))

    def __str__(self) -> str:
        return "fake bus" if self.bus == "fake" else f"redis bus, {self.nodes} node(s)"

"""The bus a world hands agentscope, before the harness wraps it.

For the fake deployment, the virtual-clock fake (:mod:`fakes.bus`). For
Redis, agentscope's own ``RedisMessageBus`` on the stage's redis-server,
through a :class:`~harness.kernel.redis_link.RedisLink`: the server is
emptied, its clock follows the virtual one (as time passes, and held still
before each release), and the bus gets the link's connection pool.
"""
from __future__ import annotations

import asyncio

from agentscope.app.message_bus import MessageBus

from fakes.bus import VirtualRedisBus
from harness.kernel.bus_inspector import BusInspector, inspector_of
from harness.kernel.interleaver import Interleaver
from harness.kernel.redis_inspector import RedisInspector
from harness.kernel.redis_link import RedisLink

from .deployment import Deployment
from .marks import LOCK_HEARTBEAT
from .stage import Stage


def bus_for(
    deployment: Deployment,
    stage: Stage,
    interleaver: Interleaver,
) -> tuple[list[MessageBus], BusInspector, RedisLink | None]:
    """The bus of each node, how the harness reads the server, and the
    Redis link (if any)."""
    if deployment.bus == "fake":
        fake = VirtualRedisBus(stage.clock.now)
        return [fake], inspector_of(fake), None
    from agentscope.app.message_bus import RedisMessageBus  # pylint: disable=import-outside-toplevel

    server = stage.redis_server()
    link = RedisLink(server.host, server.port, interleaver, server.client())
    link.flush()
    link.follow_clock()
    stage.clock.followers.append(link.follow_clock)
    buses = [RedisMessageBus(connection_pool=link.pool(owner=n)) for n in range(deployment.nodes)]
    for bus in buses:
        interleaver.run_uncontrolled(bus.__aenter__())
    return buses, RedisInspector(link, is_heartbeat), link


def is_heartbeat(task: asyncio.Task, key: str | None) -> bool:
    """Whether ``task`` is agentscope's Redis lock heartbeat (of ``key``)."""
    name = task.get_name()
    return name == LOCK_HEARTBEAT + key if key is not None else name.startswith(LOCK_HEARTBEAT)

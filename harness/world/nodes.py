"""The processes of a deployment: one :class:`Node` per process' worth of
agentscope (its ``ChatService``, run registry, both dispatchers and bus
client), all sharing the story's storage and, with Redis, one server.

Node 0 is the only one on the fake bus. Several nodes each get their own
client of the server, wrapped in a
:class:`~harness.kernel.controlled_bus.ControlledBus` that shares its
records (events, pushes, lock holders, armed faults) with node 0's: what
the server saw, whoever asked.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from agentscope.app.message_bus import MessageBus

from fakes.model import ScriptBook
from harness.kernel.controlled_bus import ControlledBus
from harness.kernel.interleaver import SETTLE_HORIZON, Interleaver

from .app import AgentscopeApp, build_app
from .stage import BOOK_NAME, Stage
from .surface import CANCEL_CHANNELS


@dataclass
class Node:
    """One process: agentscope's app and its client of the bus."""

    index: int
    app: AgentscopeApp
    bus: ControlledBus
    alive: bool = True


def build_nodes(
    stage: Stage,
    interleaver: Interleaver,
    buses: list[MessageBus],
    storage,
) -> list[Node]:
    """One node per bus, built as agentscope's lifespan builds its app."""
    nodes: list[Node] = []
    # The story's, not a process': it outlives a node's restart.
    book = ScriptBook.open(BOOK_NAME)
    for index, raw in enumerate(buses):
        first = nodes[0] if nodes else None
        bus = ControlledBus(
            raw, interleaver, deliveries=CANCEL_CHANNELS,
            sharing_with=first.bus if first else None,
        )
        with building(interleaver, index):
            app = interleaver.run_uncontrolled(
                build_app(
                    stage, bus, wrap_storage=lambda _: storage,
                    sharing_with=first.app if first else None, book=book,
                ),
            )
        nodes.append(Node(index, app, bus))
    return nodes


@contextlib.contextmanager
def building(interleaver: Interleaver, index: int):
    """Tasks created inside the block belong to node ``index``."""
    interleaver.building_node = index
    try:
        yield
    finally:
        interleaver.building_node = 0


def rebuild_node(stage: Stage, interleaver: Interleaver, node: Node, first: Node) -> AgentscopeApp:
    """A new process in ``node``'s place, after it shut down: agentscope's
    app built again as its lifespan builds it, on the same storage and the
    same client of the bus, sharing the story's sessions, scripts and tool
    desk with ``first`` (node 0, or the node itself). Its dispatchers are
    not started (see :func:`start_nodes`)."""
    with building(interleaver, node.index):
        return interleaver.run_uncontrolled(
            build_app(
                stage, node.bus, wrap_storage=lambda _: first.app.storage,
                sharing_with=first.app,
            ),
        )


def start_nodes(nodes: list[Node], interleaver: Interleaver) -> None:
    """Each node starts its wake-up and cancel dispatchers, in that order,
    as agentscope's lifespan does, one bus operation at a time (control
    must be on): the order a story starts in is the same in every run."""
    for node in nodes:
        with building(interleaver, node.index):
            interleaver.run_one_step_at_a_time(node.app.dispatcher.__aenter__())
            interleaver.run_one_step_at_a_time(node.app.cancel_dispatcher.__aenter__())


async def shut_down(nodes: list[Node], interleaver: Interleaver) -> None:
    """Cancel every task of the story where it waits (see
    :meth:`~harness.kernel.ends.Ends.cancel_every_task`),
    then stop the live nodes' dispatchers and apps; a dead node's app is
    dropped (its process is gone). Then the story's script book is closed.

    Stopping a dispatcher first, as agentscope's lifespan does, let other
    tasks move meanwhile (against a real server, replies arrive while it
    waits), and a cancel then landed inside the storage call one of them
    had started (a wake-up's retry reading its agent)."""
    await interleaver.cancel_every_task(SETTLE_HORIZON)
    for node in nodes:
        if node.alive:
            await node.app.cancel_dispatcher.__aexit__(None, None, None)
            await node.app.dispatcher.__aexit__(None, None, None)
    for node in reversed(nodes):
        if node.alive:
            await node.app.close()
    # Stopping may start tasks (a fix hands triggers back): none is left
    # pending, to be destroyed and finalised in a later story.
    await interleaver.cancel_every_task(SETTLE_HORIZON)
    nodes[0].app.book.close()

"""The simulation kernel: virtual time, one task at a time, and a record of
every bus operation.

It knows nothing of agentscope beyond the ``MessageBus`` interface it wraps.

- :mod:`.clock`: :class:`VirtualClock`, the only time the world reads.
- :mod:`.event_loop`: an asyncio loop on that clock, with an inline executor.
- :mod:`.interleaver`: :class:`Interleaver`, switch points, quiescence,
  settling, crashes; which task moves next is the caller's choice.
- :mod:`.controlled_bus`: :class:`ControlledBus`, every bus operation a
  switch point, recorded in the :mod:`.trace`.
- :mod:`.controlled_storage`: storage calls serialised and visible to
  quiescence.
- :mod:`.bus_inspector`: what the harness reads from a bus besides its
  interface.
- :mod:`.redis_server`: a real ``redis-server`` to hold the fake bus to,
  and virtual time passing on it.
"""

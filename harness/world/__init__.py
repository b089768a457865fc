"""The agentscope world: agentscope's app assembled on the kernel, and the
one object stories talk to.

- :mod:`.surface` and :mod:`.marks`: agentscope's private names, per-release
  shims and the strings it writes: the only place that touches them.
- :mod:`.stage`: what a process's stories share (loop, clock, storage,
  agents); :mod:`.app`: agentscope's app for one story; :mod:`.ids`:
  deterministic ids and timestamps through agentscope's hooks.
- :mod:`.world`: :class:`~.world.World`, the façade (observe, the parties'
  actions, control), with :mod:`.parties`, :mod:`.actors` and
  :mod:`.observe` behind it; :mod:`.observation`: what it shows.
- :mod:`.cast`: the agents of a story and their teams.

Nothing here imports the properties or the tools.
"""

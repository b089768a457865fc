"""agentscope-hitl-harness: the layers, each a folder, importing one way.

- :mod:`harness.kernel`: the simulation kernel (virtual time, the
  interleaver, the controlled bus and storage, the trace).
- :mod:`fakes` and :mod:`reference_fix`: agentscope's boundaries played by
  the harness, and the fixes.
- :mod:`harness.world`: agentscope's app assembled on the kernel, and the
  one façade stories talk to.
- :mod:`properties`: rules, invariants, the property catalog, stories.
- :mod:`harness.tools`: the pytest plugin, the CLI, the gate and replay.

``docs/architecture.md`` has the picture; ``tests/test_layers.py`` keeps
the imports one-way.
"""

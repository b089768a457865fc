"""pytest wiring: the harness's plugin (Hypothesis profiles,
``--hitl-reference-fix``, counterexample folders, a header that says which
agentscope is under test; it brings the ``--hitl-*`` options of its inert
``pytest11`` guest, :mod:`hitl_harness_pytest`), and ``pytester`` for the
plugin's own tests."""
pytest_plugins = ["harness.tools.pytest_plugin", "pytester"]

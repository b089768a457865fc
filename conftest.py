"""pytest wiring: the harness's plugin (Hypothesis profiles,
``--reference-fix``, counterexample folders, a header that says which
agentscope is under test), and ``pytester`` for the plugin's own tests."""
pytest_plugins = ["harness.tools.pytest_plugin", "pytester"]

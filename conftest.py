"""pytest wiring: Hypothesis profiles, ``--reference-fix``, and a header
that says which agentscope is under test."""
pytest_plugins = ["harness.pytest_plugin"]

"""Which agentscope the harness is testing: whatever ``import agentscope``
resolves to (an installed release, a wheel, or a checkout on PYTHONPATH)."""
from __future__ import annotations

from pathlib import Path


def describe() -> str:
    """``agentscope <version> at <path>``, for headers and reports."""
    import agentscope  # pylint: disable=import-outside-toplevel

    return f"agentscope {agentscope.__version__} at {path()}"


def version() -> str:
    """The version string of the agentscope under test."""
    import agentscope  # pylint: disable=import-outside-toplevel

    return agentscope.__version__


def path() -> str:
    """The folder ``import agentscope`` resolved to."""
    import agentscope  # pylint: disable=import-outside-toplevel

    return str(Path(agentscope.__file__).parent)

"""Which agentscope the harness is testing: whatever ``import agentscope``
resolves to (an installed release, a wheel, or a checkout on PYTHONPATH).

A release is named by its version; a source checkout is not (its version
string stays the same while its code changes), so :func:`source_digest`
names a checkout by its code, for the ids of the stories found on it."""
from __future__ import annotations

import functools
import hashlib
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


def is_installed(folder: str) -> bool:
    """Whether ``folder`` is an installed distribution (under a
    ``site-packages`` or ``dist-packages``) rather than a source checkout."""
    return "site-packages" in folder or "dist-packages" in folder


def digest_of(folder: Path) -> str:
    """``sha256:<16 hex>`` of the ``.py`` files under ``folder``: each one's
    path relative to it and its bytes, in sorted order (``__pycache__`` and
    other generated files left out)."""
    hashed = hashlib.sha256()
    for source in sorted(folder.rglob("*.py")):
        hashed.update(source.relative_to(folder).as_posix().encode() + b"\0")
        hashed.update(source.read_bytes() + b"\0")
    return f"sha256:{hashed.hexdigest()[:16]}"


@functools.cache
def source_digest() -> str:
    """For a source checkout, :func:`digest_of` its package (once per
    process); for an installed distribution, ``""`` (its version names it)."""
    folder = path()
    return "" if is_installed(folder) else digest_of(Path(folder))

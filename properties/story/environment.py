"""What a report says about where it was found: versions, never paths.

A maintainer needs agentscope's version, Python's, Hypothesis's, and the
harness's version and commit to reproduce a report; an absolute path on
the finder's machine helps nobody and leaks its layout.
"""
from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import hypothesis

from harness.world.agentscope_under_test import is_installed


@functools.cache
def harness_build() -> str:
    """``0.1.0 (commit 1a2b3c4)``, or without a commit outside a checkout."""
    try:
        version = metadata.version("agentscope-hitl-harness")
    except metadata.PackageNotFoundError:
        version = "unknown version"
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version} (commit {commit})"


#: What a report and ``story.json`` say of where agentscope was imported from.
INSTALLED, CHECKOUT = "an installed distribution", "a source checkout"


def where_agentscope_came_from(path: str) -> str:
    """An installed distribution or a source checkout, without the path
    (a description already is one)."""
    if path in (INSTALLED, CHECKOUT):
        return path
    return INSTALLED if is_installed(path) else CHECKOUT


def environment_lines(
    agentscope_version: str, agentscope_path: str, fix: str, source: str = "",
    patch: dict | None = None,
) -> list[str]:
    """The report's environment, one bullet each (``source``: a checkout's
    digest, which names its code where the version cannot; ``patch``: the
    user's own patch layer installed over agentscope, name and digest)."""
    digest = f" ({source})" if source else ""
    layer = [
        f"- **patch layer under test:** `{patch.get('name')}` ({patch.get('digest')}), "
        "the user's own runtime patches, installed over agentscope before the story "
        f"(replay with `--patch {patch.get('name')}`)",
    ] if patch else []
    return [
        f"- **agentscope under test:** {agentscope_version}, imported from "
        f"{where_agentscope_came_from(agentscope_path)}{digest}{fix}",
        *layer,
        f"- **Python:** {platform.python_version()}; **Hypothesis:** {hypothesis.__version__}; "
        f"**agentscope-hitl-harness:** {harness_build()}",
    ]

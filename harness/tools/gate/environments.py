"""One isolated environment per agentscope, built once with uv and cached.

An environment holds the agentscope a target names and the harness's own
runtime dependencies at the versions the toolchain lock names
(``requirements/toolchain.txt``, also passed to uv as constraints, so
what they need is locked too), so every environment runs the harness the
same way. It is keyed by what was installed (the target's identity, the
lock and the Python), so a second gate of the
same target starts in seconds. The harness itself is not installed into it:
its packages are put on ``PYTHONPATH`` (see :func:`harness_path`), so the
environment never depends on how the harness was installed here.

A build runs uv through anyio (:mod:`.processes`): each line uv writes is
handed on as it comes (the build is never silent), and a build that takes
longer than :data:`BUILD_LIMIT` is ended and fails.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .. import toolchain
from . import index, processes
from .specs import Target

#: The harness's runtime dependencies, installed into every environment.
HARNESS_DEPENDENCIES = (
    "aiosqlite",
    "anyio",
    "hypothesis",
    "pytest",
    "pytest-asyncio",
    "pytest-xdist",
    "redis",
)

#: The project's packages, as the property suite imports them.
HARNESS_PACKAGES = ("harness", "fakes", "properties", "reference_fix", "hitl_harness_pytest")

#: Lines of the installer's error kept in a "could not run" verdict.
ERROR_LINES = 3

#: Seconds an environment build may take before it is ended and fails.
BUILD_LIMIT = 20 * 60


class InstallFailed(Exception):
    """The installer could not build the environment (its last lines)."""


@dataclass(frozen=True)
class Environment:
    """A built environment: its folder and its Python."""

    folder: Path
    cached: bool

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"


def cache_root() -> Path:
    """``$HITL_GATE_CACHE``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)
    ``/agentscope-hitl-harness``."""
    explicit = os.environ.get("HITL_GATE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agentscope-hitl-harness"


def pinned_dependencies() -> list[str]:
    """The harness's dependencies at the versions the lock names (those
    installed here when the harness runs without its lock, from a wheel)."""
    lock = toolchain.locked()
    return [f"{name}=={lock.get(name) or metadata.version(name)}" for name in HARNESS_DEPENDENCIES]


def constraints() -> list[str]:
    """uv's arguments that hold every install to the lock."""
    return ["--constraint", str(toolchain.LOCK)] if toolchain.LOCK.is_file() else []


def key_of(target: Target) -> str:
    """What the environment of ``target`` is keyed by."""
    recipe = {
        "python": sys.version.split()[0],
        "target": target.identity,
        "install": list(target.install),
        "dependencies": pinned_dependencies(),
        "lock": hashlib.sha256(toolchain.LOCK.read_bytes()).hexdigest() if toolchain.LOCK.is_file() else None,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    return digest[:16]


def cached(target: Target) -> Environment | None:
    """The environment of ``target`` if it is in the cache."""
    folder = cache_root() / "envs" / key_of(target)
    return Environment(folder, cached=True) if (folder / "environment.json").is_file() else None


async def ensure(target: Target, say=print) -> Environment:
    """The cached environment of ``target``, built first if it is missing;
    ``say`` hears what is done and every line uv writes."""
    found = cached(target)
    if found is not None:
        return found
    envs = cache_root() / "envs"
    folder = envs / key_of(target)
    envs.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", suffix=".building", dir=envs))
    try:
        say(f"building an environment with uv in {folder}")
        await _uv(say, "venv", "--quiet", "--python", sys.executable, str(building / "venv"))
        await _uv(
            say,
            "pip",
            "install",
            "--python",
            str(building / "venv" / "bin" / "python"),
            *index.configured().uv_arguments(),  # the index the releases were listed from
            *constraints(),
            *target.install,
            *pinned_dependencies(),
        )
        (building / "venv" / "environment.json").write_text(
            json.dumps(
                {"target": target.identity, "install": list(target.install),
                 "dependencies": pinned_dependencies()},
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        if folder.exists():  # another gate built it meanwhile
            shutil.rmtree(building, ignore_errors=True)
        else:
            (building / "venv").rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return Environment(folder, cached=False)


def harness_path() -> Path:
    """A folder holding only the harness's packages (links to them), for
    ``PYTHONPATH``: nothing else of this environment leaks in."""
    source = Path(__file__).resolve().parents[3]
    stage = cache_root() / "harness-path" / hashlib.sha256(str(source).encode()).hexdigest()[:16]
    stage.mkdir(parents=True, exist_ok=True)
    for package in HARNESS_PACKAGES:
        link = stage / package
        if not link.exists():
            link.symlink_to(source / package, target_is_directory=True)
    return stage


async def _uv(say, *arguments: str) -> None:
    """Run uv, each line it writes handed to ``say`` as ``uv: ...``."""
    from uv import find_uv_bin  # pylint: disable=import-outside-toplevel

    try:
        done = await processes.stream(
            [find_uv_bin(), *arguments],
            on_line=lambda line: say(f"uv: {line.strip()}") if line.strip() else None,
            limit=BUILD_LIMIT,
        )
    except processes.TimedOut:
        raise InstallFailed(f"uv {arguments[0]} did not finish within "
                            f"{BUILD_LIMIT // 60} min (ended)") from None
    if done.returncode != 0:
        lines = [l.strip() for l in done.tail if l.strip()]
        raise InstallFailed(" | ".join(lines[-ERROR_LINES:]) or "no output")

"""What a gate SPEC names: an agentscope release, a wheel, or a checkout.

``2.0.11`` is one release, ``>=2.0.9,<2.0.11`` every release in the range,
``latest`` the newest release on the index; a path ending in ``.whl`` is a
wheel and a folder is a source checkout. A SPEC that names no agentscope is
refused with one line saying why (:class:`NotAgentscope`).
"""
from __future__ import annotations

import functools
import hashlib
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

#: agentscope's extras the harness needs (the app service and SQL storage).
EXTRAS = "service,storage-sql"

#: Used when the installed project's metadata cannot be read.
_FALLBACK_PINNED = "2.0.8"


class NotAgentscope(Exception):
    """The SPEC names no agentscope the gate could install."""


@dataclass(frozen=True)
class Target:
    """One agentscope to gate, and how to install it."""

    spec: str  # as the user wrote it (a range becomes one target per release)
    kind: str  # "release", "wheel" or "checkout"
    version: str  # the release or the wheel's version; "" for a checkout
    install: tuple[str, ...]  # what the installer is given
    identity: str  # what the environment is keyed by

    @property
    def name(self) -> str:
        """The row name in the gate's table."""
        return self.spec if self.kind != "release" or self.spec == self.version else (
            f"{self.version} ({self.spec})"
        )


def pinned_release() -> str:
    """The release the project pins as its default (its ``pinned`` extra)."""
    try:
        requirements = metadata.requires("agentscope-hitl-harness") or []
    except metadata.PackageNotFoundError:
        return _FALLBACK_PINNED
    for line in requirements:
        requirement = Requirement(line)
        if requirement.name == "agentscope" and requirement.marker is not None and (
            requirement.marker.evaluate({"extra": "pinned"})
        ):
            pinned = [s.version for s in requirement.specifier if s.operator == "=="]
            if pinned:
                return pinned[0]
    return _FALLBACK_PINNED


def default_specs() -> list[str]:
    """No SPEC given: the pinned release and the newest one."""
    return [pinned_release(), "latest"]


def resolve(spec: str) -> list[Target]:
    """The targets ``spec`` names (several for a range), or
    :class:`NotAgentscope` with the reason in one line."""
    path = Path(spec).expanduser()
    if spec.endswith(".whl"):
        return [_wheel(path)]
    if "/" in spec or spec.startswith(".") or path.is_dir():
        return [_checkout(path)]
    if spec == "latest":
        return [_release(released()[-1], spec)]
    if re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", spec):
        try:
            version = Version(spec)
        except InvalidVersion:
            raise NotAgentscope(f"{spec!r} is not a version number") from None
        if version not in released():
            newest = released()[-1]
            raise NotAgentscope(
                f"agentscope {spec} is not a release on the package index "
                f"(the newest is {newest})",
            )
        return [_release(version, spec)]
    try:
        wanted = SpecifierSet(spec)
    except InvalidSpecifier:
        raise NotAgentscope(
            f"{spec!r} is neither a release, a version range, 'latest', "
            "a wheel file nor a folder",
        ) from None
    matching = [v for v in released() if v in wanted]
    if not matching:
        raise NotAgentscope(f"no agentscope release matches {spec!r}")
    return [_release(v, spec) for v in matching]


@functools.cache
def released() -> tuple[Version, ...]:
    """agentscope's releases on the configured package index, oldest first
    (pre-releases left out)."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "agentscope"],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Available versions: (.*)", found.stdout)
    if found.returncode != 0 or match is None:
        last = (found.stderr.strip().splitlines() or ["no answer"])[-1]
        raise NotAgentscope(f"cannot list agentscope's releases on the index: {last}")
    versions = sorted(Version(v.strip()) for v in match.group(1).split(","))
    return tuple(v for v in versions if not v.is_prerelease)


def _release(version: Version, spec: str) -> Target:
    return Target(
        spec=spec,
        kind="release",
        version=str(version),
        install=(f"agentscope[{EXTRAS}]=={version}",),
        identity=f"agentscope=={version}",
    )


def _wheel(path: Path) -> Target:
    if not path.is_file():
        raise NotAgentscope(f"{path} is not a file")
    parts = path.name.split("-")
    if len(parts) < 3 or parts[0].lower() != "agentscope":
        raise NotAgentscope(f"{path.name} is not an agentscope wheel")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Target(
        spec=str(path),
        kind="wheel",
        version=parts[1],
        install=(f"agentscope[{EXTRAS}] @ {path.resolve().as_uri()}",),
        identity=f"wheel sha256:{digest}",
    )


def _checkout(path: Path) -> Target:
    """A source checkout: installed editable, so edits need no rebuild; the
    environment is keyed by the folder and its declared dependencies."""
    if not path.is_dir():
        raise NotAgentscope(f"{path} is not a folder")
    package = next(
        (p for p in (path / "src" / "agentscope", path / "agentscope") if (p / "__init__.py").is_file()),
        None,
    )
    declared = [path / name for name in ("pyproject.toml", "setup.py") if (path / name).is_file()]
    if package is None or not declared:
        raise NotAgentscope(
            f"{path} is not an agentscope source checkout (it needs "
            "agentscope/__init__.py or src/agentscope/__init__.py and a "
            "pyproject.toml or setup.py)",
        )
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in declared)).hexdigest()
    return Target(
        spec=str(path),
        kind="checkout",
        version="",
        install=("--editable", f"{path.resolve()}[{EXTRAS}]"),
        identity=f"checkout {path.resolve()} deps sha256:{digest}",
    )

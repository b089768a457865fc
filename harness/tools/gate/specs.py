"""What a gate SPEC names: an agentscope release, a wheel, or a checkout.

``2.0.11`` is one release, ``>=2.0.9,<2.0.11`` every release in the range,
``latest`` the newest release on the index; a path ending in ``.whl`` is a
wheel and a folder is a source checkout; ``v2.0.8`` is ``2.0.8``. Text that
is no SPEC at all is refused at once, before the index is asked
(:class:`BadSpec`); a SPEC that names no agentscope is refused with one line
saying why (:class:`NotAgentscope`). :func:`resolve_all` checks every SPEC's
form before it resolves any.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from . import index

#: agentscope's extras the harness needs (the app service and SQL storage).
EXTRAS = "service,storage-sql"

#: Used when the installed project's metadata cannot be read.
_FALLBACK_PINNED = "2.0.8"


class NotAgentscope(Exception):
    """The SPEC names no agentscope the gate could install."""


class BadSpec(NotAgentscope):
    """The text is no SPEC at all (a usage error)."""


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


def check_form(spec: str) -> str:
    """What kind of SPEC ``spec`` is, from its text alone (no index, no
    files): "wheel", "checkout", "latest", "release" or "range";
    :class:`BadSpec` if it is none."""
    if spec.endswith(".whl"):
        return "wheel"
    if "/" in spec or spec.startswith(".") or Path(spec).expanduser().is_dir():
        return "checkout"
    if spec == "latest":
        return "latest"
    if re.fullmatch(r"[vV]?[0-9][0-9A-Za-z.+!-]*", spec):
        try:
            Version(spec)
        except InvalidVersion:
            raise BadSpec(f"{spec!r} is not a version number") from None
        return "release"
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        raise BadSpec(
            f"{spec!r} is neither a release, a version range, 'latest', "
            "a wheel file nor a folder",
        ) from None
    return "range"


def resolve_all(specs: list[str]) -> list[Target]:
    """Every target of every SPEC: each SPEC's form is checked before any is
    resolved, so a typo is refused before the index is asked."""
    for spec in specs:
        check_form(spec)
    return [target for spec in specs for target in resolve(spec)]


def resolve(spec: str) -> list[Target]:
    """The targets ``spec`` names (several for a range), or
    :class:`NotAgentscope` with the reason in one line (:class:`BadSpec` if
    it is no SPEC at all)."""
    form = check_form(spec)
    path = Path(spec).expanduser()
    if form == "wheel":
        return [_wheel(path)]
    if form == "checkout":
        return [_checkout(path)]
    if form == "latest":
        return [_release(released()[-1], spec)]
    if form == "release":
        version = Version(spec)
        if version not in released():
            raise NotAgentscope(
                f"agentscope {version} is not a release on the package index "
                f"(the newest is {released()[-1]})",
            )
        return [_release(version, str(version))]
    wanted = SpecifierSet(spec)
    matching = [v for v in released() if v in wanted]
    if not matching:
        raise NotAgentscope(f"no agentscope release matches {spec!r}")
    return [_release(v, spec) for v in matching]


@functools.cache
def released() -> tuple[Version, ...]:
    """agentscope's releases on the package index the installs use, oldest
    first (pre-releases left out)."""
    try:
        versions = index.versions("agentscope", index.configured())
    except index.IndexUnreachable as failed:
        raise NotAgentscope(f"cannot list agentscope's releases on the index: {failed}") from None
    found = tuple(v for v in versions if not v.is_prerelease)
    if not found:
        raise NotAgentscope("the package index lists no release of agentscope")
    return found


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

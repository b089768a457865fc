"""Known violations: a committed list of what a gate may find and not fail on.

A list is a JSON file (``--known FILE``; the project's own is
``docs/findings/known.json``)::

    {"known": [
      {"property": "I1", "releases": ">=2.0.7,<2.0.9", "finding": "F1",
       "note": "a parked agent fails its run when a payload reaches its inbox"},
      {"property": "I1", "releases": ">=2.0.7,<=2.0.11", "found_by": ["I8"],
       "finding": "F2"}
    ]}

- ``property``: the property violated;
- ``releases``: the agentscope releases it is known on, a PEP 440 version
  specifier (or a list of them: any one matches); pre-releases and local
  versions count;
- ``finding``: what it is known as (a finding's id, or ``triage`` for a story
  still being looked into);
- ``found_by`` (optional): the searches it is known from, by property code. A
  property's own search is its own code; another code is a search that
  found it on the way (the verdict's ``also_found``). Without it, every
  search.
- ``deployments`` (optional): the deployments it is known on, each as a
  verdicts file says it (``{"bus": "redis", "nodes": 2}``). Without it,
  every deployment. A finding only a multi-process deployment shows (F13)
  is listed for it alone, so the same violation on the fake bus still
  fails a gate.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.world.deployment import Deployment, DeploymentRefused


class BadList(Exception):
    """The list cannot be read (one line saying where and why)."""


@dataclass(frozen=True)
class Known:
    """One known violation."""

    property: str
    releases: tuple[SpecifierSet, ...]
    finding: str
    found_by: frozenset[str] | None = None
    note: str = ""
    deployments: frozenset[Deployment] | None = None

    def covers(self, code: str, search: str, version: str | None,
               deployment: Deployment = Deployment()) -> bool:
        """Whether the violation of ``code`` that ``search`` found on
        ``version``, searched on ``deployment``, is this one."""
        if code != self.property or version is None:
            return False
        if self.found_by is not None and search not in self.found_by:
            return False
        if self.deployments is not None and deployment not in self.deployments:
            return False
        try:
            release = Version(version)
        except InvalidVersion:
            return False
        return any(s.contains(release, prereleases=True) for s in self.releases)


def read_json(path: Path, bad: type[Exception] = BadList):
    """The JSON in ``path``; ``bad`` (one line saying why) when it cannot
    be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as failed:
        raise bad(f"{path}: {failed.strerror or failed}") from None
    except json.JSONDecodeError as failed:
        raise bad(f"{path}: not JSON ({failed})") from None


def load(path: Path) -> list[Known]:
    """The list in ``path``, every entry checked."""
    data = read_json(path)
    entries = data.get("known") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise BadList(f'{path}: expected an object with a "known" list')
    return [_entry(entry, f"{path}: entry {n}") for n, entry in enumerate(entries, 1)]


def _entry(entry, where: str) -> Known:
    if not isinstance(entry, dict):
        raise BadList(f"{where}: not an object")
    missing = [k for k in ("property", "releases", "finding") if not entry.get(k)]
    if missing:
        raise BadList(f"{where}: no {', '.join(missing)}")
    from properties.catalog import BY_CODE  # pylint: disable=import-outside-toplevel

    codes = [entry["property"], *(entry.get("found_by") or [])]
    for code in codes:
        if not isinstance(code, str) or code not in BY_CODE:
            raise BadList(f"{where}: {code!r} is not a property code")
    texts = entry["releases"] if isinstance(entry["releases"], list) else [entry["releases"]]
    releases = []
    for text in texts:
        try:
            releases.append(SpecifierSet(str(text)))
        except InvalidSpecifier:
            raise BadList(f"{where}: {text!r} is not a version specifier") from None
    found_by = entry.get("found_by")
    deployments = entry.get("deployments")
    if deployments is not None:
        if not isinstance(deployments, list) or not deployments:
            raise BadList(f"{where}: deployments is not a list of deployments")
        try:
            deployments = frozenset(Deployment.from_record(d) for d in deployments)
        except DeploymentRefused as refused:
            raise BadList(f"{where}: {refused}") from None
    return Known(
        property=entry["property"],
        releases=tuple(releases),
        finding=str(entry["finding"]),
        found_by=frozenset(found_by) if found_by is not None else None,
        note=str(entry.get("note", "")),
        deployments=deployments,
    )


def findings(known: list[Known], code: str, searches: list[str], version: str | None,
             deployment: Deployment = Deployment()) -> tuple[list[str], list[str]]:
    """For the violation of ``code`` each of ``searches`` found on
    ``version`` and ``deployment``: the findings it is known as (for each
    search, the first entry that covers it), and the searches whose find no
    entry covers."""
    names, uncovered = [], []
    for search in searches:
        covering = next((k.finding for k in known if k.covers(code, search, version, deployment)),
                        None)
        if covering is None:
            uncovered.append(search)
        elif covering not in names:
            names.append(covering)
    return names, uncovered

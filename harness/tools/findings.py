"""A violation named as the finding it is, with where to read more: the
finding's title, the scripts that confirm it outside the harness, and its
upstream report.

All of it is read from what the repository already says, never kept twice:

- ``docs/findings/known.json``: which finding a property's violation is, on
  which releases and by which searches (:mod:`.gate.known`);
- the headings of ``docs/findings.md`` (``### F1. title``): the titles;
- the table of ``docs/findings/confirm/README.md``: which script confirms
  which finding (a variant such as F4b is listed under F4, named as such);
- ``docs/upstream/<finding>.md`` (or a variant's, ``F4b.md``): the report
  written for agentscope's maintainers.

An installed harness without its repository's ``docs/`` names nothing.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from harness.world.deployment import Deployment
from properties.story.report import NamedFinding

from .gate import known as known_list

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FINDINGS = DOCS / "findings"
CONFIRM = FINDINGS / "confirm"
UPSTREAM = DOCS / "upstream"

#: A finding's id as the docs write it: F4, or a variant F4b.
FINDING_ID = re.compile(r"^F(\d+)([a-z]?)$")


def finding_order(finding: str) -> tuple[int, str]:
    """F2 before F10; a name that is no F-number (``triage``) last."""
    match = FINDING_ID.match(finding)
    return (int(match.group(1)), match.group(2)) if match else (10**6, finding)


def base_of(finding: str) -> str:
    """F4 for F4b; a name that is no F-number as it is."""
    match = FINDING_ID.match(finding)
    return "F" + match.group(1) if match else finding


def titles() -> dict[str, str]:
    """Each finding's title, from its heading in ``docs/findings.md``."""
    text = (DOCS / "findings.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^### (F\d+)\. (.+)$", text, re.M)}


def confirming_scripts() -> list[tuple[list[str], str, str]]:
    """The confirm README's table: for each row, the finding ids it names
    (none for a promise or a tool), its first cell, and its script."""
    rows, in_table = [], False
    for line in (CONFIRM / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| finding | script |"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        cells = line.split("|")
        first, second = cells[1].strip(), cells[2]
        script = re.search(r"\]\(([^)]+\.py)\)", second)
        if first.startswith("---") or script is None:
            continue
        named = first.split(" (")[0]
        ids = [part.strip() for part in named.split(",")]
        rows.append(([i for i in ids if FINDING_ID.match(i)], first, script.group(1)))
    return rows


def upstream_reports(finding: str) -> list[Path]:
    """The upstream reports of ``finding`` and of its variants (F4b.md for
    F4), in name order."""
    base = base_of(finding)
    return sorted(p for p in UPSTREAM.glob(f"{base}*.md") if base_of(p.stem) == base)


def of_story(story) -> NamedFinding | None:
    """The finding a recorded story shows: its property's violation, for
    the searches that found it (its machine's enforced codes)."""
    searches = list(story.machine.get("enforcing") or [story.code])
    deployment = Deployment.from_configuration(story.machine)
    return named(story.code, searches, story.agentscope_version, deployment)


@lru_cache(maxsize=1)
def _everything() -> tuple[list, dict[str, str], list[tuple[list[str], str, str]]] | None:
    try:
        return known_list.load(FINDINGS / "known.json"), titles(), confirming_scripts()
    except (OSError, known_list.BadList):
        return None


def named(code: str, searches: list[str], version: str | None,
          deployment: Deployment = Deployment()) -> NamedFinding | None:
    """The finding a violation of ``code`` found by ``searches`` on
    ``version`` and ``deployment`` is known as (the first, as the gate decides), with its
    confirming scripts and upstream reports; one with no name when no entry
    covers it, None when the repository's docs are not here."""
    read = _everything()
    if read is None:
        return None
    known, headings, scripts = read
    names, _ = known_list.findings(known, code, searches, version, deployment)
    if not names:
        return NamedFinding(finding="", title="", confirmed_by=(), upstream=(), root=ROOT)
    finding = names[0]
    base = base_of(finding)
    confirm = [CONFIRM / script for ids, _, script in scripts if any(base_of(i) == base for i in ids)]
    return NamedFinding(
        finding=finding,
        title=headings.get(base, ""),
        confirmed_by=tuple(dict.fromkeys(p for p in confirm if p.exists())),
        upstream=tuple(upstream_reports(finding)),
        root=ROOT,
    )


def record(found: NamedFinding | None) -> dict | None:
    """``found`` as the verdicts' JSON keeps it: ``{"finding": "F1",
    "title": ..., "confirmed_by": [paths], "upstream": [paths]}``, paths
    from the repository's root ("" as the finding: none known)."""
    if found is None:
        return None
    return {
        "finding": found.finding,
        "title": found.title,
        "confirmed_by": [str(p.relative_to(ROOT)) for p in found.confirmed_by],
        "upstream": [str(p.relative_to(ROOT)) for p in found.upstream],
    }


def label(found: dict | None, links: bool = True) -> str:
    """How a verdict line names a finding, from :func:`record`:
    `` [F1: docs/findings/confirm/f1_....py, docs/upstream/F1.md]`` (paths
    from the repository's root); `` [F1]`` without ``links`` (a violation
    found on the way, whose folder's report links them); `` [no known
    finding]``; "" when the docs are not here."""
    if found is None:
        return ""
    if not found["finding"]:
        return " [no known finding]"
    paths = [*found["confirmed_by"], *found["upstream"]] if links else []
    return f" [{found['finding']}" + (f": {', '.join(paths)}" if paths else "") + "]"

"""The findings index, generated: each finding, its properties, the committed
folders that show it, and the scripts that confirm it.

    python scripts/findings_index.py           # writes docs/findings/index.md
    python scripts/findings_index.py --check   # exit 1 if index.md is out of date

Read from what the repository already says, so the index is never kept by
hand (``tests/test_committed_artifacts.py`` fails when it is out of date):

- ``docs/findings/known.json``: each entry maps a property, its releases and
  the searches that meet it (``found_by``) to a finding;
- each ``docs/findings/counterexamples/*/story.json``: the property, the
  release, the search (the machine's ``enforcing`` codes), the deployment and
  the fixes; a folder shows the finding of the first known entry that covers
  it, as the gate decides (``harness.tools.gate.known.findings``);
- the table of ``docs/findings/confirm/README.md``: which script confirms which
  finding (a variant such as F4b is listed under F4, named as the variant);
- the headings of ``docs/findings.md`` (``### F1. title``), for the titles.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# pylint: disable=wrong-import-position
from packaging.version import Version

from harness.tools.gate import known as known_list
from harness.world.deployment import Deployment
from properties.catalog import code_order
from properties.story.record import Counterexample

FINDINGS = ROOT / "docs" / "findings"
INDEX = FINDINGS / "index.md"
FOLDERS = FINDINGS / "counterexamples"
CONFIRM = FINDINGS / "confirm"

#: A finding's id as the docs write it: F4, or a variant F4b.
FINDING_ID = re.compile(r"^F(\d+)([a-z]?)$")


def finding_order(finding: str) -> tuple[int, str]:
    """F2 before F10; a name that is no F-number (``triage``) last."""
    match = FINDING_ID.match(finding)
    return (int(match.group(1)), match.group(2)) if match else (10**6, finding)


def titles() -> dict[str, str]:
    """Each finding's title, from its heading in ``docs/findings.md``."""
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
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


def folders(known: list[known_list.Known]) -> list[tuple[Counterexample, str, list[str]]]:
    """Each committed folder's story, its name and the findings it shows."""
    found = []
    for path in sorted(FOLDERS.glob("*/story.json")):
        story = Counterexample.load(path.parent)
        searches = list(story.machine.get("enforcing") or [story.code])
        names, _ = known_list.findings(known, story.code, searches, story.agentscope_version)
        found.append((story, path.parent.name, names))
    return sorted(found, key=lambda f: (code_order(f[0].code), Version(f[0].agentscope_version), f[1]))


def _folder_row(story: Counterexample, name: str) -> str:
    fixes = ", ".join(story.fixes) if story.fixes else ("reference fix" if story.reference_fix else "none")
    search = ", ".join(story.machine.get("enforcing") or [story.code])
    actual = story.expected_and_actual()[1].splitlines()[0]
    actual = actual if len(actual) <= 110 else actual[:109] + "…"
    deployment = Deployment.from_configuration(story.machine)
    return (f"| [`{name}`](counterexamples/{name}/) | {story.agentscope_version} | {search} "
            f"| {deployment} | {fixes} | {actual.replace('|', '/')} |")


FOLDER_HEAD = ("| folder | release | search | deployment | fixes | what failed |\n"
               "| --- | --- | --- | --- | --- | --- |")


def _script_link(script: str) -> str:
    return f"[`{script}`](confirm/{script})"


def render() -> str:
    """The whole of ``index.md``."""
    known = known_list.load(FINDINGS / "known.json")
    named = titles()
    shown = folders(known)
    scripts = confirming_scripts()
    by_finding: dict[str, dict[str, str]] = {}  # finding -> script -> its label
    for ids, _, script in scripts:
        for finding in ids:
            base = "F" + FINDING_ID.match(finding).group(1)
            label = _script_link(script) + ("" if finding == base else f" (as {finding})")
            by_finding.setdefault(base, {}).setdefault(script, label)

    out = [
        "# Findings index",
        "",
        "Generated by `python scripts/findings_index.py`; do not edit by hand",
        "(`tests/test_committed_artifacts.py` fails when it is out of date). Each",
        "finding of [known.json](known.json) with the properties it is known by, the",
        "committed [counterexample folders](counterexamples/) that show it (a folder",
        "shows the finding of the first entry that covers its property, release and",
        "search, as the gate decides), and the scripts of [confirm/](confirm/README.md)",
        "that confirm it outside the harness. Findings in words: [../findings.md](../findings.md).",
        "",
    ]
    for finding in sorted({k.finding for k in known}, key=finding_order):
        title = named.get(finding, "")
        out += [f"## {finding}" + (f". {title}" if title else ""), ""]
        for entry in (k for k in known if k.finding == finding):
            releases = " or ".join(str(r) for r in entry.releases)
            search = ("its own search and any other" if entry.found_by is None
                      else "the search of " + ", ".join(sorted(entry.found_by, key=code_order)))
            out.append(f"- {entry.property} on {releases}, met by {search}")
        out.append("")
        mine = [(s, n) for s, n, names in shown if finding in names]
        if mine:
            out += ["Folders:", "", FOLDER_HEAD, *(_folder_row(s, n) for s, n in mine), ""]
        else:
            out += ["Folders: none committed.", ""]
        confirm = list(by_finding.get(finding, {}).values())
        out += [f"Confirmed by: {', '.join(confirm)}." if confirm else "Confirmed by: no script.", ""]

    uncovered = [(s, n) for s, n, names in shown if not names]
    out += ["## Folders no known.json entry covers", ""]
    out += ([FOLDER_HEAD, *(_folder_row(s, n) for s, n in uncovered)] if uncovered else ["None."])
    out.append("")

    listed = {k.finding for k in known}
    others = [(first, script) for ids, first, script in scripts
              if not any("F" + FINDING_ID.match(i).group(1) in listed for i in ids)]
    out += ["## Confirming scripts of no finding in known.json", "",
            "Rows of the confirm README's table that name no finding listed above",
            "(candidates, refuted or not reproduced ones, promises, tools):", ""]
    out += [f"- {_script_link(script)}: {first}" for first, script in others] or ["None."]
    out.append("")

    in_table = {script for _, _, script in scripts}
    unnamed = sorted(p.name for p in CONFIRM.glob("*.py")
                     if not p.name.startswith("_") and p.name not in in_table)
    out += ["## Scripts in confirm/ that its README's table does not name", ""]
    out += [f"- {_script_link(name)}" for name in unnamed] or ["None."]
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if index.md differs from what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else ""
        if current != text:
            print(f"{INDEX.relative_to(ROOT)} is out of date: run python scripts/findings_index.py")
            return 1
        print(f"{INDEX.relative_to(ROOT)} is up to date")
        return 0
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What is committed is read on other machines, months later: it must hold.

- no committed file carries an absolute path of the machine that wrote it
  (a home or temporary folder, a virtual environment, a cache);
- every committed counterexample folder is in the current ``story.json``
  format, so replay and the reports read it as the harness writes it now;
- every mention of a counterexample folder in the docs and in the committed
  JSON names a folder that is committed;
- ``docs/findings/index.md`` is what ``scripts/findings_index.py`` writes now.

Each check lists everything it finds in one message, not the first.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

from properties.story.record import SCHEMA

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FOLDERS = DOCS / "findings" / "counterexamples"

#: An absolute path on a machine: under a home, temporary or work folder, or
#: through a virtual environment or a cache. Not ``~/.cache/...`` (a default
#: a reader's own home resolves), ``/…/site-packages`` (already elided) nor
#: ``/path/to/...`` (a placeholder in a usage line).
MACHINE_PATH = re.compile(
    r"(?<![\w.~/-])/(?:work|tmp|home|root|Users|private/var|var/folders)/[\w.@+-]+"
    r"|(?<![\w.~/-])/(?!path/to/)(?:[\w.@+-]+/)+(?:site-packages|dist-packages|\.venv|venv|\.cache|\.tox)/"
)

def _rooted(rest: str) -> str:
    """An absolute path, built so that this file does not carry it."""
    return "/" + rest


#: (file, the path it writes): made-up paths a test feeds the code on
#: purpose, each with why it is not a leak.
ALLOWED_PATHS = {
    ("tests/test_counterexamples.py", _rooted("x/lib/python3.11/site-packages/")):
        "a made-up installed agentscope, to check its path becomes 'an installed distribution'",
    ("tests/test_story_ids.py", _rooted("x/lib/python3.11/site-packages/")):
        "a made-up installed agentscope, to check is_installed",
    ("tests/test_gate_output.py", _rooted("home/someone")):
        "a made-up checkout path, to check the gate's table stays aligned with a long name",
}

#: A counterexample folder's name: the property and eight hex digits.
FOLDER_ID = r"I\d+-[0-9a-f]{8}"


def _committed_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode()
    return sorted(name for name in listed.split("\0") if name)


def _text(path: Path) -> str | None:
    """A file's text; None for a binary file (or one being replaced right now)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_committed_file_carries_a_machine_path():
    found, used = [], set()
    for name in _committed_files():
        text = _text(ROOT / name)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for hit in MACHINE_PATH.finditer(line):
                allowed = [key for key in ALLOWED_PATHS if key[0] == name and hit.group(0).startswith(key[1])]
                if allowed:
                    used.update(allowed)
                else:
                    found.append(f"{name}:{number}: {hit.group(0)}")
    assert found == [], "absolute machine paths in committed files:\n" + "\n".join(found)
    assert used == set(ALLOWED_PATHS), f"allowed but no longer there (drop them): {set(ALLOWED_PATHS) - used}"


def test_the_machine_path_pattern_tells_a_leak_from_a_mention():
    leaks = ["see " + _rooted("work/main/docs"), "cd " + _rooted("tmp/envs/2.0.11"), _rooted("home/me/x"),
             "at " + _rooted("root/.cache/pip/"), _rooted("opt/venv/lib/python3.11/site-packages/agentscope"),
             _rooted("srv/app/.venv/bin/python")]
    fine = ["~/.cache/agentscope-hitl-harness", "/…/site-packages/agentscope", "docs/tmp/x",
            ". .venv/bin/activate", '"/site-packages/"',
            "--python /path/to/venv/bin/python", "https://example.org/home/page"]
    assert [s for s in leaks if not MACHINE_PATH.search(s)] == []
    assert [s for s in fine if MACHINE_PATH.search(s)] == []


def test_every_committed_folder_is_in_the_current_format():
    stale = []
    for story in sorted(FOLDERS.glob("*/story.json")):
        schema = json.loads(story.read_text(encoding="utf-8")).get("schema", 1)
        if schema != SCHEMA:
            stale.append(f"{story.parent.name} (schema {schema})")
    assert list(FOLDERS.glob("*/story.json")), "no committed counterexample folder found"
    assert stale == [], (f"{len(stale)} committed folder(s) not in story format {SCHEMA} "
                         f"(regenerate them: scripts/regenerate_folders.py):\n" + "\n".join(stale))


def _outside_fences(text: str) -> str:
    """The text with fenced code blocks blanked: a run's printed output
    names the folders of that run, not committed ones."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _folder_mentions(path: Path) -> list[tuple[str, bool]]:
    """Each mention of a counterexample folder in a markdown file, and
    whether what it names exists: a link's target resolved from the file,
    and a code span that is a folder's path or id."""
    text = _outside_fences(path.read_text(encoding="utf-8"))
    mentions = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.search(rf"counterexamples/{FOLDER_ID}", target):
            mentions.append((target, (path.parent / target.split("#")[0]).exists()))
    for span in re.findall(r"`([^`\n]+)`", text):
        named = re.fullmatch(rf"(?:[\w./-]*/)?counterexamples/({FOLDER_ID})(?:/[\w.-]*)?|({FOLDER_ID})", span)
        if named:
            mentions.append((span, (FOLDERS / (named.group(1) or named.group(2))).is_dir()))
    return mentions


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_docs_and_committed_json_name_only_committed_folders():
    dangling = []
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        dangling += [f"{path.relative_to(ROOT)}: {m}" for m, exists in _folder_mentions(path) if not exists]
    for path in sorted((DOCS / "findings").glob("*.json")):
        for text in _strings(json.loads(path.read_text(encoding="utf-8"))):
            dangling += [f"{path.relative_to(ROOT)}: counterexamples/{folder}"
                         for folder in re.findall(rf"counterexamples/({FOLDER_ID})", text)
                         if not (FOLDERS / folder).is_dir()]
    assert dangling == [], (f"{len(dangling)} mention(s) of a counterexample folder that is not "
                            f"under docs/findings/counterexamples/:\n" + "\n".join(dangling))


def test_a_mention_is_read_as_a_folder_only_where_it_names_one(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See `counterexamples/I1-00000000` and [`I2-00000000`](counterexamples/I2-00000000/)\n"
        "and `I3-00000000`, not `hitl-harness replay counterexamples/I4-00000000`:\n"
        "```text\nVIOLATED -> counterexamples/I5-00000000\n```\n",
        encoding="utf-8",
    )
    assert [m for m, _ in _folder_mentions(page)] == [
        "counterexamples/I2-00000000/", "counterexamples/I1-00000000", "I2-00000000", "I3-00000000",
    ]


def _findings_index():
    spec = importlib.util.spec_from_file_location("findings_index", ROOT / "scripts" / "findings_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_findings_index_is_generated_not_kept_by_hand():
    index = _findings_index()
    assert index.INDEX.read_text(encoding="utf-8") == index.render(), (
        "docs/findings/index.md is out of date: run python scripts/findings_index.py")


def test_the_index_maps_a_folder_found_on_the_way_to_its_finding():
    """A folder of one property found by another's search shows the finding
    known.json names for that search (I7 met by I6's search is F4)."""
    from harness.tools.gate import known

    entries = known.load(DOCS / "findings" / "known.json")
    assert known.findings(entries, "I7", ["I6"], "2.0.11")[0] == ["F4"]
    folders = _findings_index().folders(entries)
    shown = {name: names for _, name, names in folders}
    assert {name for name in shown} == {p.parent.name for p in FOLDERS.glob("*/story.json")}
    on_the_way = [name for story, name, _ in folders
                  if name.startswith("I7-") and "I6" in story.machine.get("enforcing", [])]
    assert on_the_way, "no committed I7 folder found by I6's search"
    assert all(shown[name] == ["F4"] for name in on_the_way), {n: shown[n] for n in on_the_way}


def test_every_committed_report_names_the_finding_it_shows():
    """Each committed ``report.md`` says which finding it is, as the known
    list names it for the folder's property, release, search and
    deployment, with links to the confirming scripts and upstream report
    that resolve from the folder (``regenerate_folders.py --render-only``
    writes it)."""
    from harness.tools import findings
    from properties.story.record import Counterexample

    wrong, unnamed, dangling = [], [], []
    for path in sorted(FOLDERS.glob("*/story.json")):
        folder = path.parent
        named = findings.of_story(Counterexample.load(folder))
        report = (folder / "report.md").read_text(encoding="utf-8")
        if named is None or not named.finding:
            unnamed.append(folder.name)
        elif named.line(folder) not in report:
            wrong.append(f"{folder.name} (should name {named.finding})")
        for target in re.findall(r"\]\((\.\./[^)]+)\)", report):
            if not (folder / target).resolve().is_file():
                dangling.append(f"{folder.name} -> {target}")
    assert wrong == [], "reports that do not name their finding as known.json does: " + ", ".join(wrong)
    assert unnamed == [], "committed folders no known.json entry covers: " + ", ".join(unnamed)
    assert dangling == [], "links from reports to no file: " + ", ".join(dangling)

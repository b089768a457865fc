"""Rewrite the committed counterexample folders in the current format.

    python scripts/regenerate_folders.py [--python VERSION=INTERPRETER ...] [FOLDER ...]
    python scripts/regenerate_folders.py --render-only [FOLDER ...]

Each folder under ``docs/findings/counterexamples/`` (or each FOLDER given)
is played again by its own ``test_repro.py`` on the release it was found on,
in that release's interpreter (``--python 2.0.9=/path/to/python``; the
running interpreter serves its own release), and the folder the harness
writes then replaces it. A folder's id names the program (story, machine,
deployment, release, fixes), so a new format or a new id formula gives new
ids: every mention of an old id in a committed text file is rewritten to
the new one. A story that no longer fails on its release, or a release with
no interpreter, is left as it is and named. Exit 1 when any folder was left.

``--render-only`` plays nothing: each folder's ``report.md`` is rendered
again from its ``story.json``, for a change in what a report says (the
finding it names) that leaves the story's record, and so its id, as it is
(``test_repro.py`` is kept: a loaded story's arguments come back in
``story.json``'s sorted order, not the rule's).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ROOT / "docs" / "findings" / "counterexamples"


def _version_of(interpreter: str) -> str:
    return subprocess.run(
        [interpreter, "-c", "import agentscope; print(agentscope.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def _replay_into(folder: Path, interpreter: str, out: Path) -> Path | None:
    """Play ``folder``'s test_repro.py; the folder it writes to ``out``
    (None when the story no longer fails)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CI="1")
    done = subprocess.run(
        [interpreter, "-m", "pytest", str(folder / "test_repro.py"), "-q", "-p", "no:cacheprovider",
         "-p", "harness.tools.pytest_plugin", "--hitl-counterexamples", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    written = sorted(out.iterdir())
    if done.returncode != 1 or len(written) != 1:
        return None
    return written[0]


def _rewrite_mentions(renamed: dict[str, str]) -> list[str]:
    """Replace every old id with its new one in committed text files."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    changed = []
    for name in listed.stdout.splitlines():
        path = ROOT / name
        if not path.is_file() or name.startswith("docs/findings/counterexamples/"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        for old, fresh in renamed.items():
            new = new.replace(old, fresh)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(name)
    return changed


def _render_again(folders: list[Path]) -> int:
    """Write each folder's ``report.md`` again from its ``story.json``."""
    sys.path.insert(0, str(ROOT))
    # pylint: disable=import-outside-toplevel
    from harness.tools import findings
    from properties.story.record import Counterexample
    from properties.story.report import render_report

    def said(report: str) -> str:  # what a report says, apart from the harness's commit
        return re.sub(r"\(commit [0-9a-f]+\)", "", report)

    for folder in folders:
        story = Counterexample.load(folder)
        report = render_report(story, findings.of_story(story), folder)
        path = folder / "report.md"
        if path.exists() and said(path.read_text(encoding="utf-8")) == said(report):
            continue  # only the commit that renders it would change
        path.write_text(report, encoding="utf-8")
        print(f"rendered {folder.name}/report.md again")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", default=[], metavar="VERSION=INTERPRETER")
    parser.add_argument("--render-only", action="store_true",
                        help="play nothing: render report.md again from story.json")
    parser.add_argument("folders", nargs="*", type=Path)
    args = parser.parse_args()
    if args.render_only:
        return _render_again(args.folders or sorted(p for p in FOLDERS.iterdir()
                                                    if (p / "story.json").is_file()))
    interpreters = {_version_of(sys.executable): sys.executable}
    for pair in args.python:
        version, _, interpreter = pair.partition("=")
        interpreters[version] = interpreter
    folders = args.folders or sorted(p for p in FOLDERS.iterdir() if (p / "story.json").is_file())
    renamed: dict[str, str] = {}
    left: list[str] = []
    for folder in folders:
        version = json.loads((folder / "story.json").read_text(encoding="utf-8"))["agentscope_version"]
        interpreter = interpreters.get(version)
        if interpreter is None:
            left.append(f"{folder.name}: no interpreter for agentscope {version} (--python {version}=...)")
            continue
        with tempfile.TemporaryDirectory() as out:
            written = _replay_into(folder, interpreter, Path(out))
            if written is None:
                left.append(f"{folder.name}: its story does not fail the same way on agentscope {version} now")
                continue
            shutil.rmtree(folder)
            shutil.move(str(written), folder.parent / written.name)
        renamed[folder.name] = written.name
        print(f"{folder.name} -> {written.name} ({version})")
    for name in _rewrite_mentions(renamed):
        print(f"rewrote ids in {name}")
    for line in left:
        print(f"left: {line}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())

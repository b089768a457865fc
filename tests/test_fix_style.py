"""Every reference fix passes agentscope's own style checks.

agentscope's ``.pre-commit-config.yaml`` runs black 23.3.0 with
``--line-length=79`` and flake8 6.1.0 with ``--extend-ignore=E203`` (and
no flake8 or black section elsewhere: no ``setup.cfg``, ``.flake8`` or
``tox.ini``, none in its ``pyproject.toml``). A pull request made of a
fix's diff has to pass them. For each fix that targets the installed
agentscope, its patches' changes are made to the released modules' text
(as :func:`reference_fix.diffs.combined_diff` makes them), and both texts
are checked: a complaint about the patched text that the released text did
not have (on a line the patch added or changed, or one it made wrong
elsewhere) fails, naming the fix, the line and the complaint. What
agentscope as released already gets wrong does not count.
"""
from __future__ import annotations

import difflib
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import reference_fix
from harness.world import agentscope_under_test
from reference_fix.diffs import edited_modules

#: agentscope's pre-commit hooks, as its ``.pre-commit-config.yaml`` runs them.
BLACK = ("black", "23.3.0", ("--line-length=79",))
FLAKE8 = ("flake8", "6.1.0", ("--extend-ignore=E203",))

#: The fixes whose patches are reformatted separately: they fail here until
#: then, and once they pass, their mark has to go.
REFORMATTED_SEPARATELY: list[str] = []


@dataclass(frozen=True)
class Complaint:
    """One complaint of black or flake8 about one line of a module."""

    line: int  # 1-based, in the text checked
    code: str  # flake8's code, or "black"
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.code} {self.message}"


def _tool(name: str, version: str) -> None:
    module = pytest.importorskip(name)
    if module.__version__ != version:
        pytest.skip(f"agentscope's pre-commit runs {name} {version}; this is {module.__version__}")


def complaints(folder: Path, texts: dict[str, str]) -> dict[str, list[Complaint]]:
    """What black and flake8, run as agentscope's pre-commit runs them, say
    about each text (by its file name, written in ``folder``)."""
    _tool(*BLACK[:2])
    _tool(*FLAKE8[:2])
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, text in texts.items():
        files[name] = folder / name
        files[name].write_text(text, encoding="utf-8")
    no_config = folder / "black.toml"  # black reads no other configuration
    no_config.write_text("", encoding="utf-8")
    found: dict[str, list[Complaint]] = {name: [] for name in texts}
    by_path = {str(path): name for name, path in files.items()}
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *FLAKE8[2],
         "--format=%(path)s\t%(row)d\t%(code)s\t%(text)s", *map(str, files.values())],
        capture_output=True, text=True, check=False, cwd=folder,
    )
    assert flake8.returncode in (0, 1), flake8.stderr
    for row in flake8.stdout.splitlines():
        path, line, code, text = row.split("\t", 3)
        found[by_path[path]].append(Complaint(int(line), code, text))
    black = subprocess.run(
        [sys.executable, "-m", "black", "--quiet", "--diff", f"--config={no_config}", *BLACK[2],
         *map(str, files.values())],
        capture_output=True, text=True, check=False, cwd=folder,
    )
    assert black.returncode == 0, black.stderr
    for path, complaint in _black_complaints(black.stdout):
        found[by_path[path]].append(complaint)
    return found


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _black_complaints(diff: str):
    """Each line black's ``--diff`` output would change, as ``(path,
    complaint)``: a removed line where it was, an added one at the line it
    comes before."""
    lines = diff.splitlines()
    path, at = None, 0
    while at < len(lines):
        line = lines[at]
        at += 1
        if line.startswith("--- ") and at < len(lines) and lines[at].startswith("+++ "):
            path, at = line[4:].split("\t")[0], at + 1
            continue
        hunk = _HUNK.match(line)
        if not hunk:
            continue
        old, old_left, new_left = int(hunk[1]), int(hunk[2] or 1), int(hunk[4] or 1)
        said = set()
        while old_left or new_left:
            kind, text = lines[at][:1], lines[at][1:]
            at += 1
            if kind == " ":
                old, old_left, new_left = old + 1, old_left - 1, new_left - 1
            elif kind == "-":
                said.add(old)
                yield path, Complaint(old, "black", f"would reformat {text.strip()!r}")
                old, old_left = old + 1, old_left - 1
            elif kind == "+":
                new_left -= 1
                if old not in said and old - 1 not in said:
                    said.add(old)
                    yield path, Complaint(old, "black", f"would insert {text.strip()!r}")


def new_complaints(fix: str, modules: list[tuple[str, str, str]], folder: Path) -> list[str]:
    """The complaints about the patched texts of ``modules`` (each ``(path,
    released text, patched text)``, as
    :func:`~reference_fix.diffs.edited_modules` gives them) that their
    released texts do not have, one line each: the fix, the module and
    line (in the patched text), the complaint."""
    texts = {}
    for index, (_path, before, after) in enumerate(modules):
        texts[f"released_{index}.py"], texts[f"patched_{index}.py"] = before, after
    said = complaints(folder, texts)
    new = []
    for index, (path, before, after) in enumerate(modules):
        kept = _kept_lines(before, after)
        had = {(c.line, c.code) for c in said[f"released_{index}.py"]}
        lines = after.splitlines()
        for complaint in said[f"patched_{index}.py"]:
            released_line = kept.get(complaint.line)
            if released_line is not None and (released_line, complaint.code) in had:
                continue  # agentscope as released has it
            where = "added" if released_line is None else "kept"
            text = lines[complaint.line - 1].strip() if complaint.line <= len(lines) else ""
            new.append(f"{fix}: {path} {complaint} (a line the patch {where}: {text!r})")
    return new


def _kept_lines(before: str, after: str) -> dict[int, int]:
    """Each line of ``after`` the patch left as it was: its number in
    ``before`` (1-based both)."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    return {
        b + k + 1: a + k + 1
        for a, b, size in matcher.get_matching_blocks()
        for k in range(size)
    }


def _case(name: str):
    separately = name in REFORMATTED_SEPARATELY
    marks = [pytest.mark.xfail(strict=True, reason="reformatted separately")] if separately else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("fix", [_case(name) for name in reference_fix.FIXES])
def test_a_fix_adds_no_black_or_flake8_complaint(fix: str, tmp_path):
    patches = reference_fix.plan().applied.get(fix)
    if patches is None:
        pytest.skip(f"the {fix} fix does not apply to {agentscope_under_test.describe()}")
    new = new_complaints(fix, edited_modules(patches), tmp_path)
    assert not new, "\n".join(new)


def _interrupt_patch(after: str) -> reference_fix.SourcePatch:
    """A throw-away patch of ``ChatService.interrupt``'s lookup failure."""
    return reference_fix.SourcePatch(
        name="probe-style", module="agentscope.app._service._chat", cls="ChatService",
        method="interrupt", before="""raise LookupError(f"Session '{session_id}' not found.")""",
        after=after, targets=(agentscope_under_test.version(),), covers=(), what="probe-style",
    )


def test_a_long_line_a_patch_adds_is_caught(tmp_path):
    long = """raise LookupError(f"Session '{session_id}' was not found in this service's storage.")"""
    patch = _interrupt_patch(long)
    if patch.refusal() is not None:
        pytest.skip(patch.refusal())
    new = new_complaints("probe-style", edited_modules((patch,)), tmp_path)
    assert any(" E501 line too long" in line for line in new), new
    assert any(" black would reformat " in line for line in new), new
    assert all(line.startswith("probe-style: src/agentscope/app/_service/_chat.py line ") for line in new)
    assert all("(a line the patch added: 'raise LookupError(" in line for line in new), new


def test_what_the_released_module_already_has_does_not_count(tmp_path):
    patch = _interrupt_patch("""raise LookupError(f"Session '{session_id}' is not there.")""")
    if patch.refusal() is not None:
        pytest.skip(patch.refusal())
    (path, before, after), = edited_modules((patch,))
    assert new_complaints("probe-style", [(path, before, after)], tmp_path / "clean") == []
    wrong = "\n\nx = 1  \n"  # trailing white space: flake8's W291, and black's
    kept = new_complaints("probe-style", [(path, before + wrong, after + wrong)], tmp_path / "kept")
    assert kept == []
    added = new_complaints("probe-style", [(path, before, after + wrong)], tmp_path / "added")
    assert [line.split(" line ", 1)[1].split(" (")[0].split(": ", 1)[1] for line in added] == [
        "W291 trailing whitespace", "black would reformat 'x = 1'",
    ]

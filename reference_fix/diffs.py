"""The upstream form of every fix: one unified diff per fix and release.

A fix that changes several methods is several
:class:`~reference_fix.source_patch.SourcePatch` objects; its pull request is
one diff, a file section per module, each against the released module with
every change to it made (the patches of one module change different parts
of it). ``python -m reference_fix.diffs`` writes
``patches/agentscope-<release>-<fix>.diff`` for every fix that targets the
installed agentscope; run it once in each release's environment. The tests
hold each shipped diff equal to the runtime change on the release it names.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from . import plan
from .source_patch import FixRefused, SourcePatch

PATCHES_DIR = Path(__file__).resolve().parent.parent / "patches"


def diff_path(fix: str, release: str) -> Path:
    """Where the diff of the fix named ``fix`` against ``release`` is shipped."""
    return PATCHES_DIR / f"agentscope-{release}-{fix}.diff"


def edited_modules(patches: tuple[SourcePatch, ...] | list[SourcePatch]) -> list[tuple[str, str, str]]:
    """Each module ``patches`` change, by path: its path in agentscope's
    source tree, the installed text and the text with every change to it
    made (refused as any of them refuses)."""
    for patch in patches:
        why = patch.refusal()
        if why is not None:
            raise FixRefused(why)
    modules = []
    for module in sorted({p.module for p in patches}):  # one section per file, by path
        mine = [p for p in patches if p.module == module]
        _, before = mine[0]._installed_source()  # pylint: disable=protected-access
        after = before
        for patch in mine:
            after = patch.edit_module(after)
        modules.append((mine[0].path, before, after))
    return modules


def combined_diff(patches: tuple[SourcePatch, ...] | list[SourcePatch]) -> str:
    """``patches`` as one unified diff against the installed agentscope
    (refused as any of them refuses)."""
    return "".join(
        "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            ),
        )
        for path, before, after in edited_modules(patches)
    )


def for_installed() -> dict[str, str]:
    """Each fix that applies to the installed agentscope (whole, see
    :func:`reference_fix.plan`): its diff."""
    return {name: combined_diff(patches) for name, patches in plan().applied.items()}


def write() -> list[Path]:
    """Write the diff of every fix that targets the installed agentscope."""
    import agentscope  # pylint: disable=import-outside-toplevel

    written = []
    for name, diff in for_installed().items():
        path = diff_path(name, agentscope.__version__)
        path.write_text(diff, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for shipped in write():
        print(shipped)

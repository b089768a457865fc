"""One unified diff for a fix made of several patches.

A fix that changes several methods is several
:class:`~reference_fix.source_patch.SourcePatch` objects; its pull request
is one diff, a file section per module, each against the released module
with every change to it made (the patches of one module change different
parts of it).
"""
from __future__ import annotations

import difflib
import inspect
from pathlib import Path

from .source_patch import FixRefused, SourcePatch


def combined_diff(patches: tuple[SourcePatch, ...]) -> str:
    """``patches`` as one unified diff against the installed agentscope
    (refused as any of them refuses)."""
    for patch in patches:
        why = patch.refusal()
        if why is not None:
            raise FixRefused(why)
    modules = list(dict.fromkeys(p.module for p in patches))
    sections = []
    for module in modules:
        mine = [p for p in patches if p.module == module]
        path = Path(inspect.getsourcefile(mine[0]._module()))  # pylint: disable=protected-access
        before = path.read_text(encoding="utf-8")
        after = before
        for patch in mine:
            after = after.replace(patch.before, patch.after, 1)
        sections.append(
            "".join(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile=f"a/{mine[0].path}",
                    tofile=f"b/{mine[0].path}",
                ),
            ),
        )
    return "".join(sections)

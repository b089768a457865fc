"""The upstream form of every fix: one unified diff per fix and release.

``python -m reference_fix.diffs`` writes ``patches/agentscope-<release>-<fix>.diff``
for every fix that targets the installed agentscope; run it once in each
release's environment. The tests hold each shipped diff equal to the runtime
change on the release it names.
"""
from __future__ import annotations

from pathlib import Path

from . import applicable
from .source_patch import SourcePatch

PATCHES = Path(__file__).resolve().parent.parent / "patches"


def diff_path(patch: SourcePatch, release: str) -> Path:
    """Where the diff of ``patch`` against ``release`` is shipped."""
    return PATCHES / f"agentscope-{release}-{patch.name}.diff"


def write() -> list[Path]:
    """Write the diff of every fix that targets the installed agentscope."""
    import agentscope  # pylint: disable=import-outside-toplevel

    written = []
    for patch in applicable():
        path = diff_path(patch, agentscope.__version__)
        path.write_text(patch.unified_diff(), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for shipped in write():
        print(shipped)

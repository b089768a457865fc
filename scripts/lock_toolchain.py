"""Lock the toolchain again: every package of ``requirements/toolchain.in``
and what it needs, at the newest versions the index has.

    python scripts/lock_toolchain.py

Writes ``requirements/toolchain.txt`` with uv and prints what changed.
A new Hypothesis can change a verdict (the ``ci`` search is its own draw):
after an upgrade, run ``hitl-harness expect --write`` on each expected
verdict file and read what it changed before committing both.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.tools import toolchain  # noqa: E402

HEADER = """\
# The locked toolchain: exact versions, written by
#    python scripts/lock_toolchain.py
# from toolchain.in. The [pinned] install, .ci/run (pip -c) and every gate
# environment (uv -c) use this file. Do not edit by hand.
"""


def main() -> int:
    before = toolchain.locked()
    compiled = subprocess.run(
        [
            sys.executable, "-m", "uv", "pip", "compile", "--upgrade", "--quiet",
            "--python-version", "3.11", "--no-header", "--annotation-style", "line",
            str(toolchain.LOCK.with_suffix(".in")),
        ],
        check=True, capture_output=True, text=True,
    ).stdout
    toolchain.LOCK.write_text(HEADER + compiled)
    after = toolchain.locked()
    changed = [
        f"{name} {before.get(name, '-')} -> {version}"
        for name, version in sorted(after.items())
        if before.get(name) != version
    ] + [f"{name} {version} -> -" for name, version in sorted(before.items()) if name not in after]
    print("\n".join(changed) if changed else "the lock is unchanged")
    if changed:
        print("now: hitl-harness expect --write <each docs/findings/expected-*.json>")
    return 0


if __name__ == "__main__":
    sys.exit(main())

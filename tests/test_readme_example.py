"""The README's failure example is what the main job prints on the pinned
release: its I1 search is run here as the README's main job runs it (``CI=1``,
the ``ci`` profile), and the failure, the shrunk story and the verdict it
prints must be the README's block, word for word (the folder's location
aside: the README shows the default ``counterexamples/``)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.world import agentscope_under_test

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PINNED = re.search(r"^agentscope==(\S+)$", (ROOT / "requirements" / "pinned.txt").read_text(encoding="utf-8"), re.M)[1]
BLOCK = re.compile(r"<!-- example:start -->\n```text\n(.*?)```\n<!-- example:end -->", re.S)


def readme_example() -> str:
    return BLOCK.search(README.read_text(encoding="utf-8"))[1]


def example_from(output: str) -> str:
    """The failure, the story and the verdict, from the main job's output."""
    lines = output.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("_") and "[I1-" in l) + 1
    failure = []
    for line in lines[start:]:
        if line.startswith("---"):
            break
        failure.append(line)
    story = [l for l in lines if l.startswith("state = ") or l.startswith("state.")]
    verdict_at = next(i for i, l in enumerate(lines) if l.startswith("  VIOLATED  I1 "))
    verdict = [re.sub(r"-> \S*/(I1-[0-9a-f]{8})$", r"-> counterexamples/\1", lines[verdict_at]),
               lines[verdict_at + 1], lines[verdict_at + 2]]
    assert verdict[1].lstrip().startswith("finding F1 ") and verdict[2].lstrip().startswith("reached:")
    return "\n".join(failure + ["...", *story, "...", *verdict]) + "\n"


@pytest.mark.skipif(agentscope_under_test.version() != PINNED,
                    reason=f"the README shows the main job on the pinned release, agentscope {PINNED}")
def test_the_readme_example_is_what_the_main_job_prints(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "properties", "-k", "I1-", "-n", "0", "-p", "no:cacheprovider",
         "--hitl-counterexamples", str(tmp_path)],
        cwd=ROOT, env=dict(os.environ, CI="1"), capture_output=True, text=True, check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    printed = example_from(done.stdout)
    assert printed == readme_example(), "the README's example is now:\n" + printed


def test_the_example_block_is_found_and_names_a_folder():
    example = readme_example()
    assert "I1 no ReplyEnd(ERROR)" in example
    assert re.search(r"VIOLATED  I1 .* -> counterexamples/I1-[0-9a-f]{8}\n", example)

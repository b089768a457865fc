"""F8's common path, as its upstream report reproduces it.

``docs/upstream/F8_persist_repro.py`` holds `_persist`'s storage write while
two stops land (the first at the shield, the second passed on into
`_persist` by the unshielded ``await persist_task``). It must exit 1 on the
installed agentscope and 0 with ``clean-up-survives-stops`` applied to a
copy of it; and ``F8.md`` quotes it whole.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from test_upstream_repros import _explain, _installed
from test_upstream_repros import _run as run_repro

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "upstream" / "F8_persist_repro.py"


def _run(pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    return run_repro(SCRIPT, pythonpath)


def test_common_path_loses_the_message_as_released():
    done = _run()
    assert done.returncode == 1, _explain(done)
    assert "landed in _persist's update_session_state: True" in done.stdout, _explain(done)


def test_common_path_is_fixed_by_clean_up_survives_stops(tmp_path):
    version, package = _installed()
    diff = ROOT / "patches" / f"agentscope-{version}-clean-up-survives-stops.diff"
    assert diff.exists(), f"no clean-up-survives-stops diff for agentscope {version}"
    shutil.copytree(package, tmp_path / "agentscope", ignore=shutil.ignore_patterns("__pycache__"))
    patched = subprocess.run(
        ["patch", "-p2", "--batch", "--forward", "--no-backup-if-mismatch", "-d", str(tmp_path), "-i", str(diff)],
        capture_output=True, text=True,
    )
    assert patched.returncode == 0, patched.stdout + patched.stderr
    done = _run(tmp_path)
    assert done.returncode == 0, _explain(done)


def test_report_quotes_the_common_path_repro():
    report = (ROOT / "docs" / "upstream" / "F8.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", report, re.S)
    assert SCRIPT.read_text() in blocks, "F8.md does not quote F8_persist_repro.py whole"

"""The lock-held-backoff fix (F17): triggers behind a session lock that
stays held are re-queued with a growing delay instead of ten times a
second, and none is dropped.

Runs ``docs/findings/confirm/f17_lock_held_retries.py`` on the installed
agentscope as a subprocess (agentscope's own ``InMemoryMessageBus`` and
two ``WakeupDispatcher`` s): exit 1 as released, 0 with the fixes.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fix_checks import check_diff_file, check_refusals

from reference_fix import lock_held_backoff

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "findings" / "confirm" / "f17_lock_held_retries.py"
REFUSAL = lock_held_backoff.PATCHES[0].refusal()
targeted = pytest.mark.skipif(REFUSAL is not None, reason=REFUSAL or "")


def test_refuses_releases_and_code_it_was_not_written_for():
    check_refusals(lock_held_backoff.PATCHES)


@targeted
def test_the_diff_file_is_the_runtime_change():
    check_diff_file(lock_held_backoff.PATCHES, "lock-held-backoff")


def _script(*flags: str) -> tuple[int, str, list[float]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *flags], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True, text=True, timeout=120, check=False,
    )
    said = done.stdout + done.stderr
    rates = [float(r) for r in re.findall(r"minute \d: ([\d.]+) bus operations a second", said)]
    return done.returncode, said, rates


@targeted
def test_released_the_triggers_behind_a_held_lock_are_a_hot_loop():
    code, said, rates = _script()
    assert code == 1, said[-3000:]
    assert "hot loop" in said and len(rates) == 2 and min(rates) > 100, said[-3000:]


@targeted
def test_with_the_fix_they_back_off_and_none_is_dropped():
    code, said, rates = _script("--with-fix")
    assert code == 0, said[-3000:]
    assert len(rates) == 2 and rates[1] < 2.0 and rates[1] < rates[0], said[-3000:]
    assert "healthy dispatched at 0.0 s" in said, said[-3000:]

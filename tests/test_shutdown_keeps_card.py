"""A graceful shutdown during the auto-naming call keeps the parked card,
with the reference fixes applied (``stop-after-parking`` acts only on the
user's stop, never on a shutdown's cancel).

Runs ``docs/findings/confirm/shutdown_during_naming_keeps_card.py
--with-fix`` on the installed agentscope as a subprocess, on agentscope's
own ``InMemoryMessageBus`` and real sqlite storage: node 1 parks a
UI-created session on ``GatedAction`` and shuts down in the lifespan's
order while ``_auto_name_session`` waits for the model; node 2 starts on
the same storage and bus; the card must still be answerable and the
user's confirmation must run the call and end the reply ``completed``.
The script's control (a stop pressed during the naming call) must end the
reply ``INTERRUPTED`` with the fixes.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "findings" / "confirm" / "shutdown_during_naming_keeps_card.py"


def test_shutdown_during_naming_keeps_the_card_and_the_answer_resumes():
    environ = dict(os.environ, PYTHONPATH=str(ROOT))
    environ.pop("CONFIRM_LOGS", None)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--with-fix"],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60, check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "reference fixes applied:" in said and "stop-after-parking" in said, said[-3000:]
    # The registry's cancel, marked as a shutdown (shutdown-keeps-triggers), never as the user's stop.
    assert "shutdown's cancel landed in the naming call: True; its message: ('shutdown',)" in said, said[-3000:]
    assert "_auto_name_session" in said, said[-3000:]
    assert "card survived the shutdown: True" in said, said[-3000:]
    assert "resume completed: True" in said, said[-3000:]
    assert "REPLY_END after it: ['REPLY_END finished_reason=completed']" in said, said[-3000:]
    assert "the stop was honoured: the reply ended INTERRUPTED" in said, said[-3000:]
    assert "HELD on agentscope" in said, said[-3000:]

"""A gate with made-up verdicts: the package index lists a fixed set of
releases, and the gate's per-release step (environment, probe, suite) is
replaced by one that returns the verdicts a test made up, so tests of what
the gate does with verdicts run offline, in seconds."""
from __future__ import annotations

import importlib
import json
from collections.abc import Callable

from packaging.version import Version

from harness.tools.gate import specs
from harness.tools.gate.outcomes import Row

gate_module = importlib.import_module("harness.tools.gate.gate")  # the package names its function

RELEASES = tuple(Version(v) for v in ("2.0.7", "2.0.8", "2.0.9", "2.0.10", "2.0.11"))


def made_up_row(verdicts_of: Callable[[str], dict], ran: list[str], suite_seconds: float):
    """A release's row with the verdicts ``verdicts_of(version)``, noting
    each release it runs in ``ran``."""
    def row_of(target) -> Row:
        ran.append(target.version)
        row = Row(name=target.name, version=target.version,
                  verdicts=json.loads(json.dumps(verdicts_of(target.version))))
        row.seconds["suite"] = suite_seconds
        row.judge()
        return row

    return row_of


def made_up_run(row_of: Callable[..., Row]):
    """The gate's per-release step (a coroutine) giving ``row_of(target)``."""
    async def run(target, **_options) -> Row:
        return row_of(target)

    return run


def go_offline(monkeypatch, run) -> None:
    """The fixed releases, and ``run`` instead of the gate's own step."""
    monkeypatch.setattr(specs, "released", lambda: RELEASES)
    monkeypatch.setattr(gate_module, "_gate_one", run)

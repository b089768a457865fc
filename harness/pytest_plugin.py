"""The harness as a pytest plugin.

- registers the Hypothesis profiles (:mod:`harness.profiles`);
- ``--reference-fix`` applies :mod:`reference_fix` before any test runs,
  and stops the session with a clear message on a release it does not
  target;
- the header names the agentscope under test (version and path), whether
  the fix is on, and the Hypothesis profile.
"""
from __future__ import annotations

import pytest
from hypothesis import settings

from . import agentscope_under_test, profiles
from .quiet import silence_agentscope


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reference-fix",
        action="store_true",
        default=False,
        help="apply the project's reference fix for the parked-inbox bug "
        "(agentscope 2.0.7/2.0.8 only) before running",
    )


def pytest_configure(config: pytest.Config) -> None:
    profiles.register()
    silence_agentscope()
    if config.getoption("--reference-fix"):
        import reference_fix  # pylint: disable=import-outside-toplevel

        try:
            reference_fix.apply()
        except reference_fix.FixRefused as refused:
            raise pytest.UsageError(f"--reference-fix refused: {refused}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    import reference_fix  # pylint: disable=import-outside-toplevel

    fix = "ON" if reference_fix.is_applied() else "off"
    return [
        f"hitl-harness: testing {agentscope_under_test.describe()}",
        f"hitl-harness: reference fix {fix}; hypothesis profile "
        f"{settings._current_profile}",  # pylint: disable=protected-access
    ]


_VERDICTS: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember each property's outcome for the verdict table."""
    if "test_invariant_holds[" not in report.nodeid:
        return
    code = report.nodeid.split("[", 1)[1].rstrip("]")
    if report.when == "call" or report.outcome != "passed":
        _VERDICTS[code] = {"passed": "holds", "failed": "VIOLATED"}.get(
            report.outcome,
            report.outcome,
        )


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per property: holds / VIOLATED."""
    if not _VERDICTS:
        return
    terminalreporter.section(
        f"verdicts for {agentscope_under_test.describe()}",
    )
    for code in sorted(_VERDICTS):
        terminalreporter.line(f"  {_VERDICTS[code]:<9} {code}")

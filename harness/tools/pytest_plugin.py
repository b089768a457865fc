"""The harness as a pytest plugin (loaded through the ``pytest11`` entry
point wherever the package is installed, and by the project's conftest).

It stays out of other projects' tests: the Hypothesis profiles, agentscope's
quieted logs and warning filters, and the header apply only when the run is
the harness's own (:func:`is_harness_run`: its property suite or its tests
are collected, or a harness option such as ``--hitl-harness`` is given).

- registers and loads the Hypothesis profiles (:mod:`harness.profiles`);
- ``--reference-fix`` applies :mod:`reference_fix` before any test runs,
  and stops the session with a clear message on a release it does not
  target;
- the header names the agentscope under test (version and path), whether
  the fix is on, and the Hypothesis profile;
- every failing test whose exception carries a story writes a
  counterexample folder (``--counterexamples DIR``);
- the summary ends with one verdict per property, also written as JSON
  with ``--verdicts-json FILE`` (what ``hitl-harness gate`` reads).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

from harness.world import agentscope_under_test
from harness.world.marks import AGENTSCOPE_WARNINGS
from harness.world.quiet import silence_agentscope

from . import profiles

#: How verdict lines start, for a program reading the output as it comes.
VERDICT_LINE = "hitl-verdict"

#: The verdict of a property about a feature the installed agentscope lacks
#: (its record's ``needs``): not run, and neither holding nor violated.
NOT_APPLICABLE = "not applicable"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hitl-harness")
    group.addoption(
        "--hitl-harness",
        action="store_true",
        default=False,
        help="set up Hypothesis profiles, agentscope's logs and warnings as for the "
        "harness's property suite even when it is not collected",
    )
    group.addoption(
        "--reference-fix",
        action="store_true",
        default=False,
        help="apply every reference fix that targets the agentscope under "
        "test before running (refused on a release no fix targets)",
    )
    group.addoption(
        "--counterexamples",
        metavar="DIR",
        default=os.environ.get("HITL_COUNTEREXAMPLES", "counterexamples"),
        help="where failing stories are written as counterexample folders "
        "(default: ./counterexamples, or $HITL_COUNTEREXAMPLES)",
    )
    group.addoption(
        "--verdicts-json",
        metavar="FILE",
        default=None,
        help="also write each property's verdict (and counterexample) as JSON",
    )
    group.addoption(
        "--verdict-lines",
        action="store_true",
        default=False,
        help=f"print a '{VERDICT_LINE} <property> <verdict>' line as each "
        "property finishes",
    )


#: The folder holding the harness's packages (a checkout, or site-packages).
_ROOT = Path(__file__).resolve().parents[2]

#: Set on a run that is the harness's own (see :func:`is_harness_run`).
_ACTIVE = pytest.StashKey[bool]()

#: Options that ask for the harness whatever is collected.
_HARNESS_OPTIONS = ("--hitl-harness", "--reference-fix", "--verdicts-json", "--verdict-lines")


def _own_folders() -> list[Path]:
    """The property suite, and in a checkout of the harness the checkout
    (its tests)."""
    folders = [_ROOT / "properties"]
    if (_ROOT / "pyproject.toml").is_file() and (_ROOT / "harness").is_dir():
        folders.append(_ROOT)
    return folders


def is_harness_run(config: pytest.Config) -> bool:
    """Whether this run is the harness's own: a harness option is given, or
    a path collected lies in the property suite (or the harness's
    checkout). Any other project's run is left as it is."""
    if any(config.getoption(option) for option in _HARNESS_OPTIONS):
        return True
    start = Path(config.invocation_params.dir)
    folders = _own_folders()
    for arg in config.args:
        path = (start / arg.split("::", 1)[0]).resolve()
        if any(path == folder or path.is_relative_to(folder) for folder in folders):
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before Hypothesis' plugin loads ``--hypothesis-profile``
def pytest_configure(config: pytest.Config) -> None:
    if not is_harness_run(config):
        return
    config.stash[_ACTIVE] = True
    profiles.register()
    if not config.getoption("hypothesis_profile", None):
        profiles.load_default()
    silence_agentscope()
    if config.getoption("--verdict-lines"):
        _SAY_VERDICTS.append(True)
    for line in AGENTSCOPE_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    if config.getoption("--reference-fix"):
        import reference_fix  # pylint: disable=import-outside-toplevel

        try:
            reference_fix.apply()
        except reference_fix.FixRefused as refused:
            raise pytest.UsageError(f"--reference-fix refused: {refused}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config.stash.get(_ACTIVE, False):
        return []
    import reference_fix  # pylint: disable=import-outside-toplevel

    fix = (
        "ON (" + ", ".join(
            name for name, patches in reference_fix.FIXES.items()
            if any(p.is_applied() for p in patches)
        ) + ")"
        if reference_fix.is_applied()
        else "off"
    )
    from harness.world.surface import ABSENT, INBOX  # pylint: disable=import-outside-toplevel

    lines = [
        f"hitl-harness: testing {agentscope_under_test.describe()}",
        f"hitl-harness: reference fix {fix}; hypothesis profile "
        f"{settings._current_profile}",  # pylint: disable=protected-access
    ]
    if ABSENT:  # a release before the consumer registration
        lines.append(
            f"hitl-harness: inbox hand-off: {INBOX.name} ({INBOX.hand_off}); "
            f"not applicable here: {', '.join(ABSENT)}",
        )
    return lines


# ── counterexamples ───────────────────────────────────────────────────


def _stories_in(error: BaseException | None):
    """Every counterexample attached to ``error`` or its group members."""
    if error is None:
        return
    story = getattr(error, "counterexample", None)
    if story is not None:
        yield story
    for member in getattr(error, "exceptions", ()):
        yield from _stories_in(member)


def _property_of(item: pytest.Item):
    """The catalog record a property test is parametrized with, if any."""
    return getattr(getattr(item, "callspec", None), "params", {}).get("prop")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A property test starts with nothing found on the way."""
    if _property_of(item) is not None:
        from properties.machine import FOUND_ON_THE_WAY, WINDOWS_REACHED  # pylint: disable=import-outside-toplevel

        FOUND_ON_THE_WAY.clear()
        WINDOWS_REACHED.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Tag a property test's reports with its property; write the
    counterexample folder of a failing story, and of each other property's
    violation its search found on the way, naming them in the report
    (``user_properties`` travel from xdist workers too)."""
    outcome = yield
    report = outcome.get_result()
    prop = _property_of(item)
    if prop is not None and not any(k == "property" for k, _ in report.user_properties):
        report.user_properties.append(("property", (prop.code, prop.slug)))
        if prop.not_applicable() is not None:
            report.user_properties.append(("not_applicable", prop.not_applicable()))
        for part in prop.parts_left_out():
            report.user_properties.append(("left_out", part))
    if report.when != "call":
        return
    from properties.story import folder  # pylint: disable=import-outside-toplevel

    parent = Path(item.config.getoption("--counterexamples"))
    if prop is not None and prop.not_applicable() is None:
        from properties.catalog import code_order  # pylint: disable=import-outside-toplevel
        from properties.machine import FOUND_ON_THE_WAY, WINDOWS_REACHED  # pylint: disable=import-outside-toplevel
        from properties.windows import not_applicable  # pylint: disable=import-outside-toplevel

        reached = WINDOWS_REACHED.get(prop.code, {})
        missing = not_applicable(prop.windows)
        report.user_properties.append(
            ("windows", {w: reached.get(w, 0) for w in prop.windows if w not in missing}),
        )
        if missing:
            report.user_properties.append(("windows_not_applicable", missing))
        for code in sorted(FOUND_ON_THE_WAY, key=code_order):
            written = folder.write(FOUND_ON_THE_WAY[code], parent)
            report.user_properties.append(("found_on_the_way", (code, str(written))))
            report.sections.append(
                ("hitl-harness found on the way",
                 f"{code} broke while searching {prop.code}: {written}/ (not shrunk)"),
            )
    if call.excinfo is None:
        return
    for story in _stories_in(call.excinfo.value):
        written = folder.write(story, parent)
        report.user_properties.append(("counterexample", str(written)))
        report.user_properties.append(("found", story.code))
        report.sections.append(
            ("hitl-harness counterexample", f"written to {written}/ (report.md, test_repro.py)"),
        )
        _point_the_summary_at(report, f"{story.code} {story.title} -> {written}/ "
                                      f"(hitl-harness replay {written})")


def _point_the_summary_at(report: pytest.TestReport, line: str) -> None:
    """The short test summary names the folder and the replay command
    instead of repeating the trace (the failure's section keeps it)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        crash.message = line


# ── verdicts ──────────────────────────────────────────────────────────

_VERDICTS: dict[str, dict] = {}
_SAY_VERDICTS: list[bool] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember each property's outcome for the verdict table (a property
    test is one whose report carries its property)."""
    tagged = [v for k, v in report.user_properties if k == "property"]
    if not tagged:
        return
    code, slug = tagged[0]
    if report.when == "call" or report.outcome != "passed":
        verdict = {"passed": "holds", "failed": "VIOLATED"}.get(
            report.outcome,
            report.outcome,
        )
        found = [v for k, v in report.user_properties if k == "found"]
        why = next((v for k, v in report.user_properties if k == "not_applicable"), None)
        if report.outcome == "failed" and report.when != "call":
            verdict = "error"
        elif report.outcome == "skipped" and why is not None:
            verdict = NOT_APPLICABLE
        elif found and code not in found:
            verdict = "crash"  # a step raised what no rule injected
        folders = [v for k, v in report.user_properties if k == "counterexample"]
        also = dict(v for k, v in report.user_properties if k == "found_on_the_way")
        reached = next((v for k, v in report.user_properties if k == "windows"), {})
        _VERDICTS[code] = {
            "title": slug,
            "verdict": verdict,
            "counterexample": folders[0] if folders else None,
            "also_found": also,
            "windows": reached,
        }
        if why is not None:
            _VERDICTS[code]["why"] = why
        left_out = [v for k, v in report.user_properties if k == "left_out"]
        if left_out:
            _VERDICTS[code]["left_out"] = left_out
        missing = next((v for k, v in report.user_properties if k == "windows_not_applicable"), None)
        if missing:
            _VERDICTS[code]["windows_not_applicable"] = missing
        if _SAY_VERDICTS:
            where = f" {folders[0]}" if folders else ""
            extra = "".join(f" (also found {c}: {f})" for c, f in also.items())
            print(f"\n{VERDICT_LINE} {code} {verdict}{where}{extra}", flush=True)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line per property: holds / VIOLATED (and where its
    counterexample is); the same as JSON with ``--verdicts-json``."""
    import reference_fix  # pylint: disable=import-outside-toplevel
    from properties.catalog import code_order  # pylint: disable=import-outside-toplevel

    if not _VERDICTS:
        return
    terminalreporter.section(
        f"verdicts for {agentscope_under_test.describe()}",
    )
    for code in sorted(_VERDICTS, key=code_order):
        entry = _VERDICTS[code]
        where = f"  -> {entry['counterexample']}" if entry["counterexample"] else ""
        terminalreporter.line(
            f"  {entry['verdict']:<9} {code} {entry['title']}{where}",
        )
        if entry.get("why"):
            terminalreporter.line(f"            {entry['why']}")
        for part in entry.get("left_out", []):
            terminalreporter.line(f"            not applicable here: {part}")
        if entry["windows"]:
            terminalreporter.line(f"            {_windows_line(entry)}")
        if entry.get("windows_not_applicable"):
            terminalreporter.line(
                "            windows not applicable here: "
                + ", ".join(entry["windows_not_applicable"]),
            )
        for other, written in entry["also_found"].items():
            terminalreporter.line(f"            its search also found {other} -> {written}")
    target = config.getoption("--verdicts-json")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(
            json.dumps(
                {
                    "agentscope_version": agentscope_under_test.version(),
                    "agentscope_path": agentscope_under_test.path(),
                    "reference_fix": reference_fix.is_applied(),
                    "verdicts": _VERDICTS,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n",
            encoding="utf-8",
        )


def _windows_line(entry: dict) -> str:
    """``reached: w ×3, v ×1`` or ``unreached: u (reached: w ×3)``."""
    counts = entry["windows"]
    reached = ", ".join(f"{w} ×{n}" for w, n in counts.items() if n)
    unreached = [w for w, n in counts.items() if not n]
    if unreached:
        return f"unreached: {', '.join(unreached)}" + (f" (reached: {reached})" if reached else "")
    return f"reached: {reached}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which some search found another property's violation did
    not pass, even if every searched property held."""
    if exitstatus == 0 and any(entry["also_found"] for entry in _VERDICTS.values()):
        session.exitstatus = 1

"""The harness as a pytest plugin: loaded by the harness's own
``conftest.py``, by the gate (``-p harness.tools.pytest_plugin``), and by
the inert ``pytest11`` guest :mod:`hitl_harness_pytest` only on a run that
is the harness's own. The guest holds the options (``--hitl-...``), so
this module is never imported in another project's run.

- registers and loads the Hypothesis profiles (:mod:`harness.profiles`);
- ``--hitl-reference-fix`` applies :mod:`reference_fix` before any test runs,
  and stops the session with a clear message on a release it does not
  target;
- ``--hitl-patch MODULE`` installs the user's own patch layer
  (:mod:`harness.world.patch_layer`) over agentscope before any test;
- the header names the agentscope under test (version and path), whether
  the fix is on, the patch layer, and the Hypothesis profile;
- every failing test whose exception carries a story writes a
  counterexample folder (``--hitl-counterexamples DIR``);
- the summary ends with one verdict per property, also written as JSON
  with ``--hitl-verdicts-json FILE`` (what ``hitl-harness gate`` reads);
- ``--hitl-progress-file FILE`` gets a line as each property's search starts
  and as each of its stories ends (:mod:`.search_progress`; the gate's
  progress display reads it).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from harness.world import agentscope_under_test, patch_layer
from harness.kernel.redis_server import RedisServerMissing, redis_server_binary
from harness.world.deployment import Deployment, DeploymentRefused
from harness.world.marks import AGENTSCOPE_WARNINGS
from harness.world.quiet import silence_agentscope

from . import exit_reason, patch_option, profiles, search_progress, verdicts
from .writable import folder_problem

#: How verdict lines start, for a program reading the output as it comes.
VERDICT_LINE = "hitl-verdict"

#: The verdict of a property about a feature the installed agentscope lacks.
NOT_APPLICABLE = verdicts.NOT_APPLICABLE

#: The options live in the guest, which this loads where the entry point
#: did not (a gate environment, an uninstalled checkout).
pytest_plugins = ["hitl_harness_pytest"]


#: Set on a run that is the harness's own (this plugin is loaded only then).
_ACTIVE = pytest.StashKey[bool]()
#: This process's pytest configuration (Ctrl-C's hook is given none).
_CONFIG: list[pytest.Config] = []


@pytest.hookimpl(tryfirst=True)  # before Hypothesis' plugin loads ``--hypothesis-profile``
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ACTIVE] = True
    _CONFIG[:] = [config]
    folder = counterexamples_folder(config)
    problem = folder_problem(folder) if folder is not None else None
    if problem is not None:  # found now, not after the search
        raise pytest.UsageError(f"--hitl-counterexamples {folder}: {problem}")
    profiles.register(example_db=config.getoption("--hitl-example-db"))
    profiles.without_local_constants()
    if not config.getoption("hypothesis_profile", None):
        profiles.load_default()
    silence_agentscope()
    if config.getoption("--hitl-verdict-lines"):
        _SAY_VERDICTS.append(True)
    if config.getoption("--hitl-progress-file"):
        from properties.machine import STORY_ENDED  # pylint: disable=import-outside-toplevel

        writer = search_progress.Writer(config.getoption("--hitl-progress-file"))
        _PROGRESS.append(writer)
        STORY_ENDED.append(writer.story_ended)
    for line in AGENTSCOPE_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    try:
        deployment = Deployment.of(config.getoption("--hitl-bus"), config.getoption("--hitl-nodes"))
    except DeploymentRefused as refused:
        raise pytest.UsageError(str(refused)) from None
    if deployment.bus == "redis":
        try:
            redis_server_binary()  # a missing server is one line, before any test
        except RedisServerMissing as missing:
            raise pytest.UsageError(str(missing)) from None
    import properties.machine  # pylint: disable=import-outside-toplevel

    properties.machine.use_deployment(deployment)
    if config.getoption("--hitl-reference-fix"):
        import reference_fix  # pylint: disable=import-outside-toplevel

        try:
            reference_fix.apply()
        except reference_fix.FixRefused as refused:
            raise pytest.UsageError(f"--hitl-reference-fix refused: {refused}") from None
    patch_option.install_for_pytest(config.getoption("--hitl-patch"))


def counterexamples_folder(config: pytest.Config, *, asked_only: bool = False) -> Path | None:
    """Where counterexample folders go: ``--hitl-counterexamples``, else
    ``$HITL_COUNTEREXAMPLES``, else ``./counterexamples`` (``None`` with
    ``asked_only`` when neither was given)."""
    given = config.getoption("--hitl-counterexamples") or os.environ.get("HITL_COUNTEREXAMPLES")
    if given:
        return Path(given)
    return None if asked_only else Path("counterexamples")


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config.stash.get(_ACTIVE, False):
        return []
    import reference_fix  # pylint: disable=import-outside-toplevel

    fix, *refused = reference_fix.status()  # each refused fix: one line, why
    from harness.world.surface import ABSENT, INBOX  # pylint: disable=import-outside-toplevel

    lines = [
        f"hitl-harness: testing {agentscope_under_test.describe()}",
        f"hitl-harness: reference fix {fix}; hypothesis profile "
        f"{settings._current_profile}",  # pylint: disable=protected-access
        *(f"hitl-harness: reference fix {line}" for line in refused),
        f"hitl-harness: {_deployment_in_use()}",
        f"hitl-harness: {patch_option.in_use()}",
        f"hitl-harness: {_toolchain_in_use()}",
    ]
    if ABSENT:  # a release before the consumer registration
        lines.append(
            f"hitl-harness: inbox hand-off: {INBOX.name} ({INBOX.hand_off}); "
            f"not applicable here: {', '.join(ABSENT)}",
        )
    return lines


def _toolchain_in_use() -> str:
    """Which Hypothesis draws the stories, and whether it is the lock's."""
    from . import toolchain  # pylint: disable=import-outside-toplevel

    drift = toolchain.drift()
    state = (
        "no lock here" if not toolchain.locked()
        else f"NOT the lock: {', '.join(drift)}" if drift
        else "as locked"
    )
    return f"hypothesis {toolchain.hypothesis_version()}, toolchain {state}"


def _deployment_in_use() -> Deployment:
    import properties.machine  # pylint: disable=import-outside-toplevel

    return properties.machine.DEPLOYMENT


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
    """A property test starts with nothing found on the way (and says it
    starts, with ``--hitl-progress-file``)."""
    prop = _property_of(item)
    if prop is not None:
        from properties.machine import (  # pylint: disable=import-outside-toplevel
            FOUND_ON_THE_WAY, PAIRS_REACHED, WINDOWS_REACHED,
        )

        FOUND_ON_THE_WAY.clear()
        WINDOWS_REACHED.clear()
        PAIRS_REACHED.clear()
        for writer in _PROGRESS:
            writer.started(prop.code)


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

    from . import findings  # pylint: disable=import-outside-toplevel

    # A test outside the suite (a folder's test_repro.py) writes only when asked.
    parent = counterexamples_folder(item.config, asked_only=prop is None)
    if prop is not None and prop.not_applicable() is None:
        from properties.catalog import code_order  # pylint: disable=import-outside-toplevel
        from properties import reach  # pylint: disable=import-outside-toplevel
        from properties.machine import (  # pylint: disable=import-outside-toplevel
            FOUND_ON_THE_WAY, PAIRS_REACHED, WINDOWS_REACHED,
        )
        from properties.windows import not_applicable  # pylint: disable=import-outside-toplevel

        reached = WINDOWS_REACHED.get(prop.code, {})
        missing = not_applicable(prop.windows)
        report.user_properties.append(
            ("windows", {w: reached.get(w, 0) for w in prop.windows if w not in missing}),
        )
        if missing:
            report.user_properties.append(("windows_not_applicable", missing))
        if reach.not_applicable() is None:
            report.user_properties.append(("pairs", reach.counts(PAIRS_REACHED.get(prop.code, {}))))
        else:
            report.user_properties.append(("pairs_not_applicable", reach.not_applicable()))
        for code in sorted(FOUND_ON_THE_WAY, key=code_order):
            try:
                named = findings.of_story(FOUND_ON_THE_WAY[code])
                report.user_properties.append(("named", (code, findings.record(named))))
                written = str(folder.write(FOUND_ON_THE_WAY[code], parent, named))
                where = f"{written}/ (not shrunk)"
            except folder.FolderTaken as taken:  # another story's folder: said, kept
                written = where = str(taken)
            report.user_properties.append(("found_on_the_way", (code, written)))
            report.user_properties.append(
                ("found_on_the_way_says", (code, FOUND_ON_THE_WAY[code].expected_and_actual())),
            )
            report.sections.append(
                ("hitl-harness found on the way", f"{code} broke while searching {prop.code}: {where}"),
            )
    if call.excinfo is None:
        return
    _violation_first(item, call.excinfo, report)
    if parent is None:
        return
    for story in _stories_in(call.excinfo.value):
        named = findings.of_story(story)
        report.user_properties.append(("named", (story.code, findings.record(named))))
        try:
            written = folder.write(story, parent, named)
        except folder.FolderTaken as taken:  # another story's folder: said, kept
            report.user_properties.append(("found", story.code))
            report.user_properties.append(("says", story.expected_and_actual()))
            report.sections.append(("hitl-harness counterexample", str(taken)))
            _point_the_summary_at(report, f"{story.code} {story.title}: {taken}")
            continue
        report.user_properties.append(("counterexample", str(written)))
        report.user_properties.append(("found", story.code))
        report.user_properties.append(("says", story.expected_and_actual()))
        report.sections.append(
            ("hitl-harness counterexample", f"written to {written}/ (report.md, test_repro.py)"),
        )
        _point_the_summary_at(report, f"{story.code} {story.title} -> {written}/ "
                                      f"(hitl-harness replay {written})")


def _violation_first(item: pytest.Item, excinfo: pytest.ExceptionInfo, report) -> None:
    """A failure that carries a story is the violation (expected, actual,
    the bus operations, the story), not the harness's frames that found it
    (its search, shrinker, rules and checks); with ``--tb`` given, pytest's
    own style is kept. A failure with no story keeps its traceback: there
    the harness's frames are the news."""
    if item.config.getoption("tbstyle", "auto") != "auto" or not any(_stories_in(excinfo.value)):
        return
    report.longrepr = excinfo.getrepr(style="value")
    notes = getattr(excinfo.value, "__notes__", None)  # the bus operations, the story
    if notes:
        report.sections.append(("hitl-harness how it came about", "\n".join(notes)))


def _point_the_summary_at(report: pytest.TestReport, line: str) -> None:
    """The short test summary names the folder and the replay command
    instead of repeating the trace (the failure's section keeps it)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        crash.message = line


# ── verdicts ──────────────────────────────────────────────────────────

_VERDICTS: dict[str, dict] = {}
_SAY_VERDICTS: list[bool] = []
#: The ``--hitl-progress-file`` writer of this process, if asked for.
_PROGRESS: list[search_progress.Writer] = []
#: Each property test's time so far (setup, call and teardown), in seconds.
_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember each property's outcome and time for the verdict table (a
    property test is one whose report carries its property)."""
    tagged = [v for k, v in report.user_properties if k == "property"]
    if not tagged:
        return
    code, slug = tagged[0]
    _SECONDS[code] = _SECONDS.get(code, 0.0) + report.duration
    if code in _VERDICTS:  # teardown: the time it took counts too
        _VERDICTS[code]["seconds"] = round(_SECONDS[code], 2)
    if report.when == "call" or report.outcome != "passed":
        entry = _VERDICTS[code] = verdicts.entry(report, code, slug, round(_SECONDS[code], 2))
        verdict, also = entry["verdict"], entry["also_found"]
        folders = [entry["counterexample"]] if entry["counterexample"] else []
        if _SAY_VERDICTS:
            from .findings import label  # pylint: disable=import-outside-toplevel

            named = entry["findings"]
            where = (f" {folders[0]}" if folders else "") + label(named.get(code))
            extra = "".join(f" (also found {c}{label(named.get(c), links=False)}: {f})" for c, f in also.items())
            print(f"\n{VERDICT_LINE} {code} {verdict}{where}{extra}", flush=True)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line per property: holds / VIOLATED (and where its
    counterexample is); the same as JSON with ``--hitl-verdicts-json``."""
    if not _VERDICTS:
        return
    terminalreporter.section(
        f"verdicts for {agentscope_under_test.describe()}",
    )
    for line in verdicts.summary_lines(_VERDICTS):
        terminalreporter.line(line)
    if config.getoption("hypothesis_show_statistics", False):
        terminalreporter.line(
            "hitl-harness: --hypothesis-show-statistics has nothing to show here: each "
            "property's search runs its state machine through the harness (properties/story/"
            "shrink.py), not a @given test; its statistics are the windows and orders above",
        )
    target = config.getoption("--hitl-verdicts-json")
    if target:
        verdicts.write_json(Path(target), _VERDICTS, _deployment_in_use().record())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which some search found another property's violation did
    not pass, even if every searched property held; one ended by Ctrl-C
    exits 130, as a shell's command would."""
    if exitstatus == 0 and any(entry["also_found"] for entry in _VERDICTS.values()):
        session.exitstatus = 1
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        session.exitstatus = exit_reason.INTERRUPTED
    _SESSION[:] = [session]


#: The session, for the last line's exit code (read once pytest is done).
_SESSION: list[pytest.Session] = []


@pytest.hookimpl(trylast=True)
def pytest_keyboard_interrupt(excinfo) -> None:  # pylint: disable=unused-argument
    """Ctrl-C is one line (the last, below), not pytest's traceback of
    where it landed."""
    reporter = _terminal()
    if reporter is not None:  # pytest has no option to leave its report out
        reporter._report_keyboardinterrupt = lambda: None  # pylint: disable=protected-access


def _terminal():
    config = _CONFIG[0] if _CONFIG else None
    return config.pluginmanager.get_plugin("terminalreporter") if config is not None else None


@pytest.hookimpl(trylast=True)  # after pytest's own summary: this is the last line
def pytest_unconfigure(config: pytest.Config) -> None:
    patch_layer.uninstall()  # the layer's own undo, in every process that installed it
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or not _SESSION:
        return
    status = _SESSION[0].exitstatus
    if _VERDICTS or status == exit_reason.INTERRUPTED:
        line = exit_reason.reason(status, _VERDICTS, agentscope_under_test.version(),
                                  _deployment_in_use())
        reporter.write_line(line, bold=True, red=status != 0, green=status == 0)

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
  with ``--verdicts-json FILE`` (what ``hitl-harness gate`` reads);
- ``--progress-file FILE`` gets a line as each property's search starts
  and as each of its stories ends (:mod:`.search_progress`; the gate's
  progress display reads it).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from harness.world import agentscope_under_test
from harness.kernel.redis_server import RedisServerMissing, redis_server_binary
from harness.world.deployment import BUSES, DEFAULT_REDIS_NODES, Deployment, DeploymentRefused
from harness.world.marks import AGENTSCOPE_WARNINGS
from harness.world.quiet import silence_agentscope

from . import profiles, search_progress, verdicts

#: How verdict lines start, for a program reading the output as it comes.
VERDICT_LINE = "hitl-verdict"

#: The verdict of a property about a feature the installed agentscope lacks.
NOT_APPLICABLE = verdicts.NOT_APPLICABLE


def pytest_addoption(parser: pytest.Parser) -> None:
    import reference_fix  # pylint: disable=import-outside-toplevel

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
        "test before running (refused on a release no fix targets). The fixes: "
        + "; ".join(reference_fix.summary().splitlines()),
    )
    group.addoption(
        "--bus",
        choices=BUSES,
        default=None,
        help="the bus stories run on: 'fake' (default), or 'redis': agentscope's "
        "RedisMessageBus on a real redis-server the harness starts (Debian's "
        "redis-server package)",
    )
    group.addoption(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help=f"processes' worth of agentscope sharing the Redis server and the "
        f"storage (default {DEFAULT_REDIS_NODES} with --bus redis; the fake bus is one)",
    )
    group.addoption(
        "--counterexamples",
        metavar="DIR",
        default=os.environ.get("HITL_COUNTEREXAMPLES", "counterexamples"),
        help="where failing stories are written as counterexample folders "
        "(default: ./counterexamples, or $HITL_COUNTEREXAMPLES)",
    )
    group.addoption(
        "--example-db",
        metavar="URL",
        default=None,
        help="the thorough profile's example database: redis://host:port[/db] (one "
        "database several runners share) or a folder (default: $HITL_HARNESS_EXAMPLE_DB, "
        "else .hypothesis/examples)",
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
    group.addoption(
        "--progress-file",
        metavar="FILE",
        default=None,
        help="append a JSON line to FILE as each property's search starts and "
        "as each of its stories ends (for a progress display)",
    )


#: The folder holding the harness's packages (a checkout, or site-packages).
_ROOT = Path(__file__).resolve().parents[2]

#: Set on a run that is the harness's own (see :func:`is_harness_run`).
_ACTIVE = pytest.StashKey[bool]()

#: Options that ask for the harness whatever is collected.
_HARNESS_OPTIONS = (
    "--hitl-harness", "--reference-fix", "--verdicts-json", "--verdict-lines", "--bus", "--nodes",
    "--progress-file", "--example-db",
)


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
    profiles.register(example_db=config.getoption("--example-db"))
    profiles.without_local_constants()
    if not config.getoption("hypothesis_profile", None):
        profiles.load_default()
    silence_agentscope()
    if config.getoption("--verdict-lines"):
        _SAY_VERDICTS.append(True)
    if config.getoption("--progress-file"):
        from properties.machine import STORY_ENDED  # pylint: disable=import-outside-toplevel

        writer = search_progress.Writer(config.getoption("--progress-file"))
        _PROGRESS.append(writer)
        STORY_ENDED.append(writer.story_ended)
    for line in AGENTSCOPE_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    try:
        deployment = Deployment.of(config.getoption("--bus"), config.getoption("--nodes"))
    except DeploymentRefused as refused:
        raise pytest.UsageError(str(refused)) from None
    if deployment.bus == "redis":
        try:
            redis_server_binary()  # a missing server is one line, before any test
        except RedisServerMissing as missing:
            raise pytest.UsageError(str(missing)) from None
    import properties.machine  # pylint: disable=import-outside-toplevel

    properties.machine.use_deployment(deployment)
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

    fix, *refused = reference_fix.status()  # each refused fix: one line, why
    from harness.world.surface import ABSENT, INBOX  # pylint: disable=import-outside-toplevel

    lines = [
        f"hitl-harness: testing {agentscope_under_test.describe()}",
        f"hitl-harness: reference fix {fix}; hypothesis profile "
        f"{settings._current_profile}",  # pylint: disable=protected-access
        *(f"hitl-harness: reference fix {line}" for line in refused),
        f"hitl-harness: {_deployment_in_use()}",
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
    starts, with ``--progress-file``)."""
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

    parent = Path(item.config.getoption("--counterexamples"))
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
            written = folder.write(FOUND_ON_THE_WAY[code], parent)
            report.user_properties.append(("found_on_the_way", (code, str(written))))
            report.user_properties.append(
                ("found_on_the_way_says", (code, FOUND_ON_THE_WAY[code].expected_and_actual())),
            )
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
        report.user_properties.append(("says", story.expected_and_actual()))
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
#: The ``--progress-file`` writer of this process, if asked for.
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
            where = f" {folders[0]}" if folders else ""
            extra = "".join(f" (also found {c}: {f})" for c, f in also.items())
            print(f"\n{VERDICT_LINE} {code} {verdict}{where}{extra}", flush=True)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line per property: holds / VIOLATED (and where its
    counterexample is); the same as JSON with ``--verdicts-json``."""
    if not _VERDICTS:
        return
    terminalreporter.section(
        f"verdicts for {agentscope_under_test.describe()}",
    )
    for line in verdicts.summary_lines(_VERDICTS):
        terminalreporter.line(line)
    target = config.getoption("--verdicts-json")
    if target:
        verdicts.write_json(Path(target), _VERDICTS, _deployment_in_use().record())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which some search found another property's violation did
    not pass, even if every searched property held."""
    if exitstatus == 0 and any(entry["also_found"] for entry in _VERDICTS.values()):
        session.exitstatus = 1

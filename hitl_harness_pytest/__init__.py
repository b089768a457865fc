"""The harness's ``pytest11`` entry point: a guest in every project of the
environment the harness is installed in, so it does almost nothing.

It adds the harness's options, each ``--hitl-``-prefixed, and imports
nothing of the harness (whose top-level packages ``harness``,
``properties``, ``fakes`` and ``reference_fix`` may share a name with the
host project's own modules). Only on a run that is the harness's own (its
property suite or its checkout is collected, or a harness option such as
``--hitl-harness`` is given) does it load the real plugin,
:mod:`harness.tools.pytest_plugin`; the harness's own ``conftest.py`` loads
that plugin directly.
"""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

#: The real plugin, by the name pytest registers it under.
PLUGIN = "harness.tools.pytest_plugin"

#: The folder holding the harness's packages (a checkout, or site-packages).
ROOT = Path(__file__).resolve().parent.parent

#: The harness's top-level packages, which a host's own modules may hide.
PACKAGES = ("harness", "properties", "fakes", "reference_fix")

#: Buses the harness can build (:data:`harness.world.deployment.BUSES`).
BUSES = ("fake", "redis")

#: Options that ask for the harness whatever is collected (``dest`` names).
ASKING = ("hitl_harness", "hitl_reference_fix", "hitl_counterexamples", "hitl_verdicts_json",
          "hitl_verdict_lines", "hitl_bus", "hitl_nodes", "hitl_progress_file", "hitl_example_db",
          "hitl_patch")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hitl-harness", "agentscope-hitl-harness (inert unless asked)")
    group.addoption(
        "--hitl-harness", action="store_true", default=False,
        help="load the harness's plugin (Hypothesis profiles, agentscope's logs and "
        "warnings, the header) even when its property suite is not collected",
    )
    group.addoption(
        "--hitl-reference-fix", action="store_true", default=False,
        help="apply every reference fix that targets the agentscope under test before "
        "running (refused on a release no fix targets; `hitl-harness gate --help` lists them)",
    )
    group.addoption(
        "--hitl-patch", metavar="MODULE", default=None,
        help="your own runtime patch layer, put under test with agentscope: a dotted "
        "module name or a path to a .py file, with install() (and optionally "
        "uninstall()); imported and installed once before any story, after the "
        "reference fixes; its name and source digest are recorded in each story",
    )
    group.addoption(
        "--hitl-bus", choices=BUSES, default=None,
        help="the bus stories run on: 'fake' (default), or 'redis': agentscope's "
        "RedisMessageBus on a real redis-server the harness starts",
    )
    group.addoption(
        "--hitl-nodes", type=int, default=None, metavar="N",
        help="processes' worth of agentscope sharing the Redis server and the storage "
        "(default 2 with --hitl-bus redis; the fake bus is one)",
    )
    group.addoption(
        "--hitl-counterexamples", metavar="DIR", default=None,
        help="where failing stories are written as counterexample folders, checked "
        "before any test (default: $HITL_COUNTEREXAMPLES, else ./counterexamples; "
        "a test outside the property suite, such as a folder's test_repro.py, "
        "writes one only when this or the variable is given)",
    )
    group.addoption(
        "--hitl-example-db", metavar="URL", default=None,
        help="the thorough profile's example database: redis://host:port[/db] or a "
        "folder (default: $HITL_HARNESS_EXAMPLE_DB, else .hypothesis/examples)",
    )
    group.addoption(
        "--hitl-verdicts-json", metavar="FILE", default=None,
        help="also write each property's verdict (and counterexample) as JSON",
    )
    group.addoption(
        "--hitl-verdict-lines", action="store_true", default=False,
        help="print a 'hitl-verdict <property> <verdict>' line as each property finishes",
    )
    group.addoption(
        "--hitl-progress-file", metavar="FILE", default=None,
        help="append a JSON line to FILE as each property's search starts and as each "
        "of its stories ends (for a progress display)",
    )


def _own_folders() -> list[Path]:
    """The property suite, and in a checkout of the harness the checkout."""
    folders = [ROOT / "properties"]
    if (ROOT / "pyproject.toml").is_file() and (ROOT / "harness").is_dir():
        folders.append(ROOT)
    return folders


def is_harness_run(config: pytest.Config) -> bool:
    """Whether this run is the harness's own: a harness option is given, or
    a path collected lies in the property suite (or the harness's
    checkout). Any other project's run is left as it is."""
    if any(config.getoption(dest) for dest in ASKING):
        return True
    start = Path(config.invocation_params.dir)
    folders = _own_folders()
    for arg in config.args:
        path = (start / arg.split("::", 1)[0]).resolve()
        if any(path == folder or path.is_relative_to(folder) for folder in folders):
            return True
    return False


def hidden_packages() -> list[str]:
    """The harness's packages that ``import`` would not find in :data:`ROOT`
    (a host's own ``properties.py`` found first), each as ``name (where)``.
    Nothing is imported to tell."""
    hidden = []
    for name in PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if origin is None or origin != (ROOT / name / "__init__.py").resolve():
            hidden.append(f"{name} ({origin or 'not found'})")
    return hidden


@pytest.hookimpl(tryfirst=True)  # before Hypothesis' plugin loads its profile
def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.has_plugin(PLUGIN) or not is_harness_run(config):
        return
    hidden = hidden_packages()
    if hidden:
        raise pytest.UsageError(
            "the harness cannot run here: this project's own modules hide its packages: "
            + ", ".join(hidden),
        )
    # Registering runs the plugin's pytest_configure at once (a historic hook).
    config.pluginmanager.register(importlib.import_module(PLUGIN), PLUGIN)

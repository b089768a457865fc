"""A local checkout of agentscope as the gate's candidate, the way a
maintainer checks a pull request's branch before merging it.

The checkout here is made from the release the project pins (its source
under ``src/``, as agentscope's repository has it, and a ``pyproject.toml``
declaring its dependencies); the "branch" is that checkout with the
release's fix of an I1 finding applied to its source, as its diff would. What the
gate does with it is checked up to the point where the suite would run: the
SPEC resolves before any work, its environment installs it editable (built
once, not rebuilt for an edit), the checkout's code is what runs in that
environment, and the finding the branch fixes replays as passing there. A
whole gate of a checkout takes minutes; docs/gate.md shows one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import anyio
import pytest

import reference_fix
from reference_fix import parked_continuation
from harness.tools.gate import environments, inputs, specs
from harness.tools import toolchain
from harness.world import agentscope_under_test
from properties.story.record import Counterexample

from gate_runs import RELEASES

ROOT = Path(__file__).resolve().parent.parent

#: The I1 stories the project keeps, found by I1's own search on the
#: agentscope installed here (F1's on 2.0.8 when pinned, F13's on 2.0.11),
#: which BRANCH_FIX clears. (Another search's I1 may be another finding:
#: I8's is F2, which fails on 2.0.11 too.)
F1_HERE = [
    folder for folder in sorted((ROOT / "docs" / "findings" / "counterexamples").glob("I1-*"))
    if Counterexample.load(folder).agentscope_version == agentscope_under_test.version()
    and Counterexample.load(folder).machine.get("enforcing") == ["I1"]
]


#: The fix the branch makes, by release: parked-continuation (F1) where the
#: reported bug is; from 2.0.9 on, message-while-parked (F2's), which clears
#: the I1 stories kept there (F13, across nodes).
BRANCH_FIX = (
    "parked-continuation" if agentscope_under_test.version() in parked_continuation.TARGET_RELEASES
    else "message-while-parked"
)


def _make_checkout(folder: Path, *, fixed: bool) -> Path:
    """A checkout of the installed agentscope in ``folder``; with ``fixed``,
    its source changed as :data:`BRANCH_FIX`'s diff changes it."""
    # with its compiled modules: a copy keeps their sources' times, so they stay valid
    shutil.copytree(agentscope_under_test.path(), folder / "src" / "agentscope")
    needs = [r for r in metadata.requires("agentscope") or [] if "extra ==" not in r]
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "agentscope"\n'
        f'version = "{agentscope_under_test.version()}"\n'
        f"dependencies = {needs!r}\n",
        encoding="utf-8",
    )
    if fixed:
        for patch in reference_fix.FIXES[BRANCH_FIX]:
            source = folder / patch.path
            text = source.read_text(encoding="utf-8")
            for before, after in patch.edits:
                assert before in text, f"{patch.name} no longer applies to {source}"
                text = text.replace(before, after, 1)
            source.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return _make_checkout(tmp_path_factory.mktemp("released") / "agentscope", fixed=False)


@pytest.fixture(scope="module")
def branch(tmp_path_factory) -> Path:
    return _make_checkout(tmp_path_factory.mktemp("branch") / "agentscope", fixed=True)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setattr(specs, "released", lambda: RELEASES)
    monkeypatch.setenv("HITL_GATE_CACHE", str(tmp_path / "cache"))


def test_a_checkout_is_resolved_with_the_baseline_before_any_work(branch):
    plan = inputs.prepare([str(branch)], baseline="2.0.8")
    (target,) = plan.candidates
    assert (target.kind, target.name) == ("checkout", str(branch))
    assert target.install == ("--editable", f"{branch.resolve()}[service,storage-sql]")
    assert plan.baseline.version == "2.0.8"


def test_its_environment_installs_it_editable_and_is_built_once(branch, monkeypatch):
    ran: list[tuple[str, ...]] = []

    async def uv(_say, *arguments: str) -> None:
        ran.append(arguments)
        if arguments[0] == "venv":  # what uv would make
            Path(arguments[-1]).mkdir(parents=True)

    monkeypatch.setattr(environments, "_uv", uv)
    (target,) = specs.resolve(str(branch))
    def ensure() -> environments.Environment:
        return anyio.run(lambda: environments.ensure(target, say=lambda _message: None))

    built = ensure()
    assert not built.cached
    install = ran[1]
    assert install[:2] == ("pip", "install")
    assert install[install.index("--editable") + 1] == f"{branch.resolve()}[service,storage-sql]"
    assert set(environments.pinned_dependencies()) <= set(install)
    assert install[install.index("--constraint") + 1] == str(toolchain.LOCK)  # the lock holds it all
    ran.clear()
    assert ensure().cached and ran == []

    chat = branch / reference_fix.FIXES[BRANCH_FIX][0].path
    chat.write_text(chat.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert environments.key_of(specs.resolve(str(branch))[0]) == environments.key_of(target)
    declared = branch / "pyproject.toml"
    original = declared.read_text(encoding="utf-8")
    try:
        declared.write_text(original.replace("dependencies = [", "dependencies = ['rich', "),
                            encoding="utf-8")
        assert environments.key_of(specs.resolve(str(branch))[0]) != environments.key_of(target)
    finally:
        declared.write_text(original, encoding="utf-8")


def _in_checkout(folder: Path, *command: str) -> subprocess.CompletedProcess:
    """``python *command`` where ``import agentscope`` finds the checkout,
    as in its gate environment (an editable install puts ``src`` on the
    path), with the harness on ``PYTHONPATH`` as the gate puts it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HITL_"))}
    environ["PYTHONPATH"] = os.pathsep.join([str(folder / "src"), str(ROOT)])
    return subprocess.run([sys.executable, *command], env=environ, cwd=folder, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_checkouts_code_is_what_runs_and_the_harness_drives_it(branch):
    done = _in_checkout(branch, "-m", "harness.tools.gate.probe")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["drivable"], found["missed"]
    assert Path(found["path"]).resolve() == (branch / "src" / "agentscope").resolve()
    assert found["version"] == agentscope_under_test.version()


@pytest.mark.parametrize("story", F1_HERE, ids=lambda p: p.name)
def test_the_finding_the_branch_fixes_replays_as_passing_on_it(checkout, branch, story):
    before = _in_checkout(checkout, "-m", "harness", "replay", str(story))
    assert before.returncode == 1, before.stdout + before.stderr
    assert "still fails the same way: I1" in before.stdout
    after = _in_checkout(branch, "-m", "harness", "replay", str(story))
    assert after.returncode == 0, after.stdout + after.stderr
    assert "passes now: I1 holds through the whole story" in after.stdout
    assert f"at {branch.resolve() / 'src' / 'agentscope'}" in after.stdout

"""``--patch MODULE``: a user's own patch layer under test.

The layer is refused before any work when it cannot be used (one line, the
usage error's exit code); once installed, its name and source digest go
into every story it ran in (``story.json``, the folder's id, report.md),
into the gate's JSON, and replay says when a story's layer is not the one
installed. None of this runs a search.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from harness.tools.cli import main
from harness.tools.gate.compare import load_run
from harness.tools.gate.outcomes import Exit
from harness.tools.replay import patch_note, replay_folder
from harness.world import patch_layer
from properties.story import folder
from properties.story.playback import replay
from properties.story.record import SCHEMA, SCHEMA_WITH_PATCH, Counterexample, Step
from properties.story.report import render_report

from gate_runs import gate_module, go_offline, made_up_row, made_up_run

ROOT = Path(__file__).resolve().parent.parent

#: A story found on 2.0.8 that fails there in a few steps (F1).
FOLDER = ROOT / "docs" / "findings" / "counterexamples" / "I1-7d171876"

#: A story, as test_story_ids.py makes one.
STORY = Counterexample(
    code="I1", title="a reply ends with ERROR", statement="", failure="I1 broken", trace="",
    events={}, steps=[Step("user_sends_message", {"session": "solo", "model_turn": "answers"})],
    machine={"enforcing": ["I1"]},
    agentscope_version="2.0.8", agentscope_path="an installed distribution", reference_fix=False,
)

#: A layer that patches nothing and notes its calls.
NOTING = """
CALLS = []

def install():
    CALLS.append("install")

def uninstall():
    CALLS.append("uninstall")
"""


def _layer(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _no_layer_left():
    """Each test's layers leave neither an installed layer nor a module."""
    before = set(sys.modules)
    yield
    patch_layer.uninstall()
    for name in set(sys.modules) - before:
        if name.startswith("layer_"):
            del sys.modules[name]


# ── refused before any work ──────────────────────────────────────────


@pytest.mark.parametrize(("body", "says"), [
    ("import a_module_nobody_has_written\n\ndef install():\n    pass\n",
     "fails to import: ModuleNotFoundError: No module named 'a_module_nobody_has_written'"),
    ("def install(:\n", "cannot be read: SyntaxError"),
    ("def uninstall():\n    pass\n", "defines no install()"),
    ("install = 3\n", "has no callable install()"),
], ids=["fails-to-import", "syntax-error", "no-install", "install-not-callable"])
@pytest.mark.parametrize("command", [["gate", "2.0.8"], ["expect"], ["replay", str(FOLDER)]],
                         ids=["gate", "expect", "replay"])
def test_an_unusable_layer_is_one_line_and_a_usage_error(tmp_path, capsys, monkeypatch,
                                                         body, says, command):
    ran = []
    monkeypatch.setattr(gate_module, "_gate_one", lambda *a, **k: ran.append(a))
    layer = _layer(tmp_path, "layer_broken", body)
    assert main([*command, "--patch", str(layer)]) == Exit.USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and ran == []
    assert captured.err.startswith(f"hitl-harness {command[0]}: error: --patch {layer}: {says}")
    assert captured.err.count("\n") == 1


def test_a_module_name_not_on_the_path_is_refused(capsys):
    assert main(["gate", "2.0.8", "--patch", "no_such_layer_here"]) == Exit.USAGE
    assert capsys.readouterr().err == ("hitl-harness gate: error: --patch no_such_layer_here: "
                                       "no module named 'no_such_layer_here' on sys.path\n")


def test_pytest_refuses_it_in_one_line_before_any_search(tmp_path):
    layer = _layer(tmp_path, "layer_missing_import", "import nowhere_at_all\n\ndef install():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "properties", "-k", "I1-", "-n", "0", "-p", "no:cacheprovider",
         "--hitl-patch", str(layer)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == [f"ERROR: --hitl-patch {layer}: fails to import: ModuleNotFoundError: "
                     "No module named 'nowhere_at_all'"]


# ── recorded ─────────────────────────────────────────────────────────


def test_the_layer_is_named_by_its_stem_and_the_digest_of_its_source(tmp_path):
    layer = _layer(tmp_path, "layer_named", NOTING)
    found = patch_layer.find(str(layer))
    assert found.name == "layer_named" and found.digest.startswith("sha256:")
    assert len(found.digest) == len("sha256:") + 16
    layer.write_text(NOTING + "\n# changed\n", encoding="utf-8")
    assert patch_layer.find(str(layer)).digest != found.digest


def test_a_patch_enters_story_json_and_the_id_only_when_given(tmp_path):
    layer = {"name": "team_guard", "digest": "sha256:0123456789abcdef"}
    patched = replace(STORY, patch=layer)
    assert patched.short_id != STORY.short_id
    assert replace(STORY, patch={**layer, "digest": "sha256:fedcba9876543210"}).short_id \
        not in (STORY.short_id, patched.short_id)
    plain = json.loads(STORY.to_json())
    assert "patch" not in plain and plain["schema"] == SCHEMA
    written = folder.write(patched, tmp_path)
    saved = json.loads((written / "story.json").read_text(encoding="utf-8"))
    assert saved["schema"] == SCHEMA_WITH_PATCH and saved["patch"] == layer
    assert Counterexample.load(written) == patched
    assert "**patch layer under test:** `team_guard` (sha256:0123456789abcdef)" in render_report(patched)
    assert "patch layer" not in render_report(STORY)


def test_a_story_played_with_a_layer_installed_records_it(tmp_path):
    layer = _layer(tmp_path, "layer_noting", NOTING)
    installed = patch_layer.install(str(layer))
    module = sys.modules["layer_noting"]
    assert module.CALLS == ["install"]
    recorded = Counterexample.load(FOLDER)
    failure = replay(recorded)
    again = getattr(failure, "counterexample", None)
    if again is None:
        pytest.skip(f"{FOLDER.name} does not fail on this agentscope, so nothing is recorded")
    assert again.patch == installed.record() == {"name": "layer_noting", "digest": installed.digest}
    assert again.name != replace(again, patch={}).name
    patch_layer.uninstall()
    assert module.CALLS == ["install", "uninstall"]


# ── the gate and replay ──────────────────────────────────────────────


def test_the_gate_hands_the_layer_on_and_records_it_in_its_json(tmp_path, monkeypatch, capsys):
    layer = _layer(tmp_path, "layer_for_the_gate", NOTING)
    seen = []
    row = made_up_row(lambda version: {}, [], suite_seconds=1.0)

    async def run(target, *, options, **_rest):
        seen.append(options.patch)
        return row(target)

    go_offline(monkeypatch, run)
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "gate.json"
    main(["gate", "2.0.9", "--patch", "layer_for_the_gate.py", "--json", str(saved)])
    assert seen == [str(layer)]  # absolute, for a process in another folder
    digest = patch_layer.find(str(layer)).digest
    assert f"patch layer: layer_for_the_gate ({digest})" in capsys.readouterr().out
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["patch"] == {"name": "layer_for_the_gate", "digest": digest}
    assert str(tmp_path) not in saved.read_text(encoding="utf-8")
    assert load_run(saved)[0]["patch"] == data["patch"]


def test_a_gate_without_a_layer_writes_no_patch(tmp_path, monkeypatch):
    go_offline(monkeypatch, made_up_run(made_up_row(lambda version: {}, [], suite_seconds=1.0)))
    saved = tmp_path / "gate.json"
    main(["gate", "2.0.9", "--json", str(saved)])
    assert "patch" not in json.loads(saved.read_text(encoding="utf-8"))


def test_merge_refuses_gates_of_different_layers(tmp_path, monkeypatch, capsys):
    go_offline(monkeypatch, made_up_run(made_up_row(lambda version: {}, [], suite_seconds=1.0)))
    one, two = tmp_path / "a.json", tmp_path / "b.json"
    main(["gate", "2.0.9", "--json", str(one)])
    main(["gate", "2.0.10", "--json", str(two), "--patch", str(_layer(tmp_path, "layer_m", NOTING))])
    capsys.readouterr()
    assert main(["merge", str(one), str(two)]) == Exit.USAGE
    assert "different --patch layers" in capsys.readouterr().err


def test_replay_says_when_the_layer_differs():
    layer = {"name": "guard", "digest": "sha256:0123456789abcdef"}
    assert patch_note(layer, layer, "I1-x") is None
    assert patch_note({}, {}, "I1-x") is None
    assert patch_note(layer, {}, "I1-x") == (
        "note: I1-x was recorded with guard (sha256:0123456789abcdef), this replay has no "
        "patch layer; replay it with --patch guard to play it as found")
    other = {"name": "guard", "digest": "sha256:fedcba9876543210"}
    assert "this replay has guard (sha256:fedcba9876543210)" in patch_note(layer, other, "I1-x")
    assert patch_note({}, layer, "I1-x").startswith("note: I1-x was recorded with no patch layer")


def test_replay_installs_the_layer_and_says_the_story_had_none(tmp_path, capsys):
    layer = _layer(tmp_path, "layer_replayed", NOTING)
    code = replay_folder(FOLDER, patch=str(layer))
    out = capsys.readouterr().out
    digest = patch_layer.find(str(layer)).digest
    assert (f"note: {FOLDER.name} was recorded with no patch layer, this replay has "
            f"layer_replayed ({digest})") in out
    assert f"with the patch layer layer_replayed ({digest})" in out
    assert code in (0, 1) and sys.modules["layer_replayed"].CALLS == ["install", "uninstall"]

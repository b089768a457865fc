"""How the gate runs its work: child processes through anyio, each bounded
and ended with its whole process group; a suite's budget and its own
verdict, "did not finish"; the pre-gate that replays the committed
counterexamples before any search; and the progress it shows.

A real release's suite takes minutes, so most of these tests give the gate
an environment whose ``python`` is a small script playing the parts the
gate talks to (the pre-gate, the suite): it says what a real one says, and
on request hangs with a child of its own, as pytest-xdist's workers would.
One test runs the real pre-gate on the agentscope installed here.
"""
from __future__ import annotations

import importlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from packaging.version import Version

from harness.tools import search_progress
from harness.tools.cli import main
from harness.tools.gate import environments, gate, pregate, processes, progress, runner, specs
from harness.tools.gate.outcomes import Exit, Row, exit_code
from harness.tools.gate.table import table

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings" / "counterexamples"


def _found_here() -> Path:
    """A committed counterexample found on the agentscope installed here
    by its own property's search (one found on the way enforces the
    searching property too, which may fail first)."""
    from harness.world import agentscope_under_test

    def story(folder: Path) -> dict:
        return json.loads((folder / "story.json").read_text(encoding="utf-8"))

    return next(
        f for f in sorted(FINDINGS.iterdir())
        if story(f).get("agentscope_version") == agentscope_under_test.version()
        and story(f)["machine"].get("enforcing") == [story(f)["code"]]
    )

#: The part of a gate environment's ``python`` the gate talks to, faked:
#: ``-m harness.tools.gate.pregate_inside`` and ``-m pytest`` (FAKE_SUITE=hang:
#: after one verdict it starts a child, as xdist starts workers, and waits).
FAKE_PYTHON = r'''#!{python}
import json, os, subprocess, sys, time

args = sys.argv[1:]
if args[:2] == ["-m", "harness.tools.gate.pregate_inside"]:
    print("a line that is not JSON")
    print(json.dumps({{"probe": {{"version": "2.0.8", "path": "/fake/agentscope",
                                 "drivable": True, "fix_refusal": None, "fix_covers": [],
                                 "properties": 2}}}}), flush=True)
    for folder in [a for a in args[2:] if not a.startswith("--")]:
        name = os.path.basename(folder)
        status = "passes now" if name.startswith("fixed") else "still fails"
        print(json.dumps({{"replayed": {{"folder": name, "path": folder, "found_on": "2.0.7",
                                        "code": "I1", "status": status,
                                        "why": "I1 holds through the whole story"}}}}), flush=True)
    sys.exit(0)
assert args[:2] == ["-m", "pytest"], args
options = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)

def event(**said):
    with open(options["hitl-progress-file"], "a") as progress:
        progress.write(json.dumps(said) + "\n")

event(event="started", code="I1")
event(event="story", code="I1", stories=1, failed=0)
event(event="story", code="I1", stories=2, failed=1)
time.sleep(1)  # the gate reads the progress file twice a second
print("hitl-verdict I1 VIOLATED cx/I1-00000000", flush=True)
if os.environ.get("FAKE_SUITE") == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["FAKE_CHILD"], "w") as written:
        written.write(str(child.pid))
    time.sleep(600)
event(event="started", code="I2")
print("hitl-verdict I2 holds", flush=True)
with open(options["hitl-verdicts-json"], "w") as verdicts:
    json.dump({{"verdicts": {{
        "I1": {{"title": "no-error", "verdict": "VIOLATED", "counterexample": "cx/I1-00000000",
                "also_found": {{}}, "windows": {{}}}},
        "I2": {{"title": "no-reminder", "verdict": "holds", "counterexample": None,
                "also_found": {{}}, "windows": {{}}}},
    }}}}, verdicts)
sys.exit(1)
'''


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ended(pid: int) -> bool:
    """Whether ``pid`` ends within ten seconds (a signalled process is
    gone only once the kernel has run its death, later on a loaded machine)."""
    for _ in range(100):
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A gate cache of its own, holding a faked environment of 2.0.8."""
    monkeypatch.setenv("HITL_GATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(specs, "released", lambda: (Version("2.0.7"), Version("2.0.8")))
    _fake_environment(specs.resolve("2.0.8")[0])
    return tmp_path / "cache"


def _fake_environment(target) -> None:
    """``target``'s environment in the cache, its python :data:`FAKE_PYTHON`."""
    folder = environments.cache_root() / "envs" / environments.key_of(target)
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(FAKE_PYTHON.format(python=sys.executable), encoding="utf-8")
    python.chmod(0o755)
    (folder / "environment.json").write_text("{}\n", encoding="utf-8")


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Two counterexample folders (the fake pre-gate says the second passes)."""
    for name in ("I1-aaaa0000", "fixed-I1-bbbb0000"):
        (tmp_path / "corpus" / name).mkdir(parents=True)
        (tmp_path / "corpus" / name / "story.json").write_text("{}", encoding="utf-8")
    return tmp_path / "corpus"


# ── child processes ───────────────────────────────────────────────────


def test_a_child_s_lines_are_heard_as_they_come_and_its_exit_code_kept():
    heard = []
    done = anyio.run(lambda: processes.stream(
        [sys.executable, "-c", "import sys; print('one'); print('two', file=sys.stderr); "
         "sys.stdout.write('three'); sys.exit(3)"],
        on_line=heard.append,
    ))
    assert sorted(heard) == ["one", "three", "two"]
    assert done.returncode == 3
    assert done.last_line() in ("one", "two", "three")


def test_a_child_out_of_time_is_ended_with_its_whole_group(tmp_path):
    pid_file = tmp_path / "child"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    with pytest.raises(processes.TimedOut) as timed_out:
        anyio.run(lambda: processes.stream([sys.executable, "-c", script], limit=5))
    assert timed_out.value.tail == ["started"]
    assert _ended(int(pid_file.read_text(encoding="utf-8")))  # the grandchild went too


# ── the suite ─────────────────────────────────────────────────────────


def _run_suite(cache: Path, tmp_path: Path, budget: float | None):
    (target,) = specs.resolve("2.0.8")
    env = environments.cached(target)
    said, events = [], []
    result = anyio.run(lambda: runner.run_suite(
        env.python, log=env.folder / "last-run.log", profile="ci", with_fix=False, counterexamples=tmp_path / "cx", workers=2,
        say=said.append, budget=budget, on_event=events.append,
    ))
    return result, said, events


def test_a_suite_s_verdicts_and_progress_come_back(cache, tmp_path):
    result, said, events = _run_suite(cache, tmp_path, budget=None)
    assert not result.did_not_finish and result.broken is None
    assert {c: v["verdict"] for c, v in result.verdicts.items()} == {"I1": "VIOLATED", "I2": "holds"}
    assert said == ["I1 VIOLATED cx/I1-00000000", "I2 holds"]
    assert [(e["event"], e["code"], e.get("failed")) for e in events] == [
        ("started", "I1", None), ("story", "I1", 0), ("story", "I1", 1), ("started", "I2", None),
    ]


def test_a_suite_over_its_budget_is_ended_and_did_not_finish(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SUITE", "hang")
    monkeypatch.setenv("FAKE_CHILD", str(tmp_path / "child"))
    result, said, _ = _run_suite(cache, tmp_path, budget=8)
    assert result.did_not_finish
    assert result.verdicts == {}
    assert said == ["I1 VIOLATED cx/I1-00000000"]
    assert "did not finish within its budget of 8 s" in result.broken
    assert "1 properties had verdicts (I1 VIOLATED cx/I1-00000000)" in result.broken
    assert _ended(int((tmp_path / "child").read_text(encoding="utf-8")))  # its "worker"


# ── environments, built side by side ──────────────────────────────────


def test_environments_are_built_side_by_side_two_at_a_time(tmp_path, monkeypatch):
    gate_module = importlib.import_module("harness.tools.gate.gate")  # the package names its function
    monkeypatch.setattr(specs, "released", lambda: tuple(
        Version(v) for v in ("2.0.7", "2.0.8", "2.0.9", "2.0.10")))
    targets = specs.resolve(">=2.0.7")
    building, most, order = [], [], []

    async def build(target, say):
        building.append(target.version)
        most.append(len(building))
        say(f"uv: Resolved 85 packages for {target.version}")
        await anyio.sleep(0.2)
        building.remove(target.version)
        if target.version == "2.0.9":
            raise environments.InstallFailed("no wheel for 2.0.9")
        return environments.Environment(tmp_path / target.version, cached=False)

    monkeypatch.setattr(environments, "cached", lambda _target: None)
    monkeypatch.setattr(environments, "ensure", build)
    out = io.StringIO()
    display = progress.Display([(t.name, t.version) for t in targets],
                               progress.History(tmp_path / "t.json"), live=False, stream=out)

    async def gate_them():
        async with anyio.create_task_group() as work:
            builds = gate_module._Builds(targets, work, display)
            for target in targets:
                done = await builds.of(target)
                order.append((target.version, done.failure or done.env.folder.name))

    anyio.run(gate_them)
    assert max(most) == gate_module.BUILDS_AT_ONCE == 2
    assert order == [("2.0.7", "2.0.7"), ("2.0.8", "2.0.8"), ("2.0.9", "no wheel for 2.0.9"),
                     ("2.0.10", "2.0.10")]
    said = out.getvalue()
    assert "[2.0.10 (>=2.0.7)] uv: Resolved 85 packages for 2.0.10" in said
    assert re.match(r"\[1/4 2\.0\.7 \(>=2\.0\.7\)\] \d+:\d\d elapsed · ETA unknown \(no earlier "
                    r"run of 2\.0\.7 \(>=2\.0\.7\) and 3 more\) · building the environment", said)


# ── the gate, end to end on the faked environment ─────────────────────


def test_the_gate_gives_did_not_finish_its_own_exit_code(cache, corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_SUITE", "hang")
    monkeypatch.setenv("FAKE_CHILD", str(tmp_path / "child"))
    code = gate(["2.0.8"], budget=8 / 60, corpus=corpus, live=False,
                counterexamples=tmp_path / "cx", json_path=tmp_path / "v.json")
    assert code == Exit.DID_NOT_FINISH == 7
    out, err = capsys.readouterr()
    # the pre-gate came first, before any search
    assert err.index("pre-gate in") < err.index("running the properties") < err.index("did not finish")
    assert "\n2.0.8  off  did not finish\n" in out
    assert "exit 7: a property suite did not finish within its budget" in out
    assert "2.0.8: 2 replayed: 1 still fails, 1 passes now" in out
    assert "passes now: fixed-I1-bbbb0000 (found on 2.0.7): I1 holds through the whole story" in out
    written = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert written["exit_code"] == 7
    (spec,) = written["specs"]
    assert spec["outcome"] == "did_not_finish"
    assert [(e["folder"], e["status"]) for e in spec["pregate"]] == [
        ("I1-aaaa0000", "still fails"), ("fixed-I1-bbbb0000", "passes now"),
    ]


def test_a_finished_gate_keeps_its_durations_for_the_next_eta(cache, corpus, tmp_path, capsys):
    first = gate(["2.0.8"], corpus=corpus, live=False, counterexamples=tmp_path / "cx")
    assert first == Exit.VIOLATED
    err = capsys.readouterr().err
    assert re.search(r"\[1/1 2\.0\.8\] \d+:\d\d elapsed · "
                     r"ETA unknown \(no earlier run of 2\.0\.8\) · pre-gate", err)
    assert re.search(r"\[1/1 2\.0\.8\] .* · property 1 of 2: I1 \(0 stories\)\n", err)
    assert "I1 shrinking (I1 failed a story: shrinking it)" in err
    kept = json.loads((cache / "timings.json").read_text(encoding="utf-8"))
    (runs,) = kept.values()
    assert set(runs) == {"pregate", "suite"}
    gate(["2.0.8"], corpus=corpus, live=False, counterexamples=tmp_path / "cx")
    err = capsys.readouterr().err
    assert "ETA unknown" not in err
    assert re.search(r"\[1/1 2\.0\.8\] \d+:\d\d elapsed · ETA \d+:\d\d · pre-gate", err)


def test_stopping_the_gate_ends_the_suite_and_its_workers(tmp_path, corpus, monkeypatch):
    """Ctrl-C: the suite runs in a session of its own (the terminal's
    SIGINT does not reach it), so the gate ends its group on the way out;
    it says so in one line, exits 130, and writes its JSON and JUnit with
    the release that did not finish marked interrupted."""
    wheel = tmp_path / "agentscope-2.0.8-py3-none-any.whl"  # a SPEC that needs no index
    wheel.write_bytes(b"pretend")
    monkeypatch.setenv("HITL_GATE_CACHE", str(tmp_path / "cache"))
    _fake_environment(specs.resolve(str(wheel))[0])
    environ = {**os.environ, "FAKE_SUITE": "hang", "FAKE_CHILD": str(tmp_path / "child")}
    gate_process = subprocess.Popen(
        [sys.executable, "-m", "harness", "gate", str(wheel), "--corpus", str(corpus),
         "--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml")],
        env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(600):  # until the suite's "worker" runs (at most a minute)
            if (tmp_path / "child").is_file() and (tmp_path / "child").read_text():
                break
            if gate_process.poll() is not None:
                break
            anyio.run(anyio.sleep, 0.1)
        worker = int((tmp_path / "child").read_text(encoding="utf-8"))
        assert _alive(worker)
        gate_process.send_signal(signal.SIGINT)
        _, err = gate_process.communicate(timeout=60)
    finally:
        gate_process.kill()
    assert _ended(worker)
    assert gate_process.returncode == 130
    assert err.splitlines()[-1] == (
        "hitl-harness gate: interrupted (Ctrl-C); the JSON and JUnit mark what did not finish"
    ), err
    assert not [w for w in ("Traceback", "CancelledError", "KeyboardInterrupt") if w in err], err
    saved = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    assert saved["exit_code"] == 130, saved
    assert [(s["outcome"], s["reason"]) for s in saved["specs"]] == [
        ("interrupted", "Ctrl-C before it finished")]
    assert 'type="interrupted"' in (tmp_path / "gate.xml").read_text(encoding="utf-8")


# ── the command line ──────────────────────────────────────────────────


def test_a_corpus_that_is_no_folder_of_counterexamples_is_refused_before_any_work(tmp_path, capsys):
    assert main(["gate", "2.0.8", "--corpus", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == (
        f"hitl-harness gate: error: --corpus {tmp_path / 'missing'}: no such folder\n"
    )
    assert main(["gate", "2.0.8", "--corpus", str(tmp_path)]) == 2
    assert "holds no counterexample folder" in capsys.readouterr().err


def test_did_not_finish_is_its_own_verdict_and_exit_code():
    late = Row("2.0.8", version="2.0.8").could_not_run(Exit.DID_NOT_FINISH, "budget ran out")
    broken = Row("2.0.9").could_not_run(Exit.RUN_BROKE, "pytest exited 3")
    assert exit_code([late]) == Exit.DID_NOT_FINISH
    assert exit_code([late, broken]) == Exit.RUN_BROKE  # the lowest code wins
    text = table([late, broken])
    assert "\n2.0.8  off  did not finish\n" in text
    assert "2.0.8: did not finish: budget ran out" in text
    assert "could not run (the run broke)" in text


# ── the pre-gate, for real ────────────────────────────────────────────


def test_the_pre_gate_replays_each_folder_on_the_installed_agentscope(tmp_path):
    from harness.world import agentscope_under_test

    here = agentscope_under_test.version()
    mine = _found_here()
    unknown = tmp_path / "I1-unknown0"
    shutil.copytree(mine, unknown)
    story = json.loads((unknown / "story.json").read_text(encoding="utf-8"))
    story["steps"][0]["rule"] = "user_dances"
    (unknown / "story.json").write_text(json.dumps(story), encoding="utf-8")
    unreadable = tmp_path / "I1-broken00"
    unreadable.mkdir()
    (unreadable / "story.json").write_text("not json", encoding="utf-8")
    env = environments.Environment(Path(sys.prefix), cached=True)
    found, replayed = anyio.run(lambda: pregate.run(
        env, [mine, unknown, unreadable], with_fix=False, environ=runner.environ(),
    ))
    assert found["drivable"] and found["version"] == here and found["properties"] >= 14
    by_folder = {entry["folder"]: entry for entry in replayed}
    assert by_folder[mine.name]["status"] == "still fails"
    assert by_folder[mine.name]["why"].startswith("the same way: ")
    assert by_folder[unknown.name]["status"] == "cannot replay"
    assert by_folder[unknown.name]["why"] == (
        "step 1: rule user_dances does not apply: no such rule on this story's machine"
    )
    assert by_folder[unreadable.name]["status"] == "cannot replay"
    assert by_folder[unreadable.name]["why"].startswith("unreadable: ")


def test_a_pre_gate_that_cannot_drive_says_so_for_every_folder(tmp_path, corpus):
    broken = tmp_path / "env" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    broken.write_text(f"#!{sys.executable}\nimport sys\nprint('no agentscope here')\nsys.exit(1)\n",
                      encoding="utf-8")
    broken.chmod(0o755)
    found, replayed = anyio.run(lambda: pregate.run(
        environments.Environment(tmp_path / "env", cached=True), pregate.folders(corpus),
        with_fix=False, environ=dict(os.environ),
    ))
    assert not found["drivable"]
    assert [e["status"] for e in replayed] == ["cannot replay", "cannot replay"]
    assert replayed[0]["why"] == (
        "the harness cannot drive this agentscope: the probe crashed: the pre-gate broke "
        "(exit 1): no agentscope here"
    )


# ── progress ──────────────────────────────────────────────────────────


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_says_the_phase_the_time_and_the_eta(tmp_path):
    history = progress.History(tmp_path / "timings.json")
    clock, out = _Clock(), io.StringIO()
    display = progress.Display([("2.0.8", "k8"), ("2.0.9", "k9")], history, live=False,
                               stream=out, now=clock)
    display.start("2.0.8")
    display.phase("2.0.8", progress.PREGATE)
    assert out.getvalue().splitlines()[-1] == (
        "[1/2 2.0.8] 0:00 elapsed · ETA unknown (no earlier run of 2.0.8, 2.0.9) · pre-gate"
    )
    for key in ("k8", "k9"):
        history.record(key, "pregate", 10)
        history.record(key, "suite", 200)
    assert progress.History(tmp_path / "timings.json").estimate("k9", "suite") == 200
    clock.now += 4
    display.phase("2.0.8", progress.PROPERTIES)
    display.suite_has("2.0.8", 15)
    clock.now += 50
    display.event("2.0.8", {"event": "started", "code": "I1"})
    display.event("2.0.8", {"event": "started", "code": "I2"})
    display.event("2.0.8", {"event": "story", "code": "I2", "stories": 7, "failed": 1})
    display.event("2.0.8", {"event": "story", "code": "I1", "stories": 3, "failed": 0})
    lines = out.getvalue().splitlines()
    # 150 s left of 2.0.8's suite, then 2.0.9's pre-gate and suite
    assert lines[-1] == ("[1/2 2.0.8] 0:54 elapsed · ETA 6:00 · property 2 of 15: I1 (0 stories), "
                         "I2 shrinking (I2 failed a story: shrinking it)")
    assert display.doing(display.releases["2.0.8"]) == "property 2 of 15: I1 (3 stories), I2 shrinking"
    display.verdict("2.0.8", "I2 VIOLATED cx/I2-1")
    assert out.getvalue().splitlines()[-1] == "[2.0.8] I2 VIOLATED cx/I2-1"
    assert display.doing(display.releases["2.0.8"]) == "property 2 of 15: I1 (3 stories)"
    clock.now += 500
    assert display.eta() == "ETA 3:30"  # 2.0.8's suite overran: 2.0.9's part is left


def test_a_build_is_never_silent(tmp_path):
    out = io.StringIO()
    display = progress.Display([("2.0.8", "k")], progress.History(tmp_path / "t.json"),
                               live=False, stream=out)
    for line in ("uv: Resolved 85 packages in 1.2s", "uv: + aiosqlite==0.21.0",
                 "uv: Installed 85 packages in 300ms"):
        display.building("2.0.8", line)
    assert out.getvalue().splitlines() == [
        "[2.0.8] uv: Resolved 85 packages in 1.2s", "[2.0.8] uv: Installed 85 packages in 300ms",
    ]
    assert display.releases["2.0.8"].building == "uv: Installed 85 packages in 300ms"


def test_the_live_display_shows_the_release_and_keeps_what_is_said(tmp_path):
    out = io.StringIO()

    async def show():
        display = progress.Display([("2.0.8", "k")], progress.History(tmp_path / "t.json"),
                                   live=True, stream=out)
        async with display:
            display.start("2.0.8")
            display.phase("2.0.8", progress.PREGATE)
            display.building("2.0.8", "uv: Resolved 85 packages")
            assert display._render().plain.startswith("[1/1 2.0.8] 0:00 elapsed · ETA unknown")
            assert "· pre-gate\n" in display._render().plain
            assert "2.0.8: building the environment (0:00): uv: Resolved" in display._render().plain
            display.say("2.0.8", "pre-gate in 3.1 s: 31 replayed: 31 still fail")

    anyio.run(show)
    assert "[2.0.8] pre-gate in 3.1 s: 31 replayed: 31 still fail" in out.getvalue()


# ── the suite's progress events ───────────────────────────────────────


def test_progress_lines_are_read_whole_as_they_are_appended(tmp_path):
    path = tmp_path / "progress.jsonl"
    reader = search_progress.Reader(path)
    assert reader.new_events() == []
    writer = search_progress.Writer(path)
    writer.story_ended({"I1"}, False)  # no search under way: nothing to say
    writer.started("I1")
    writer.story_ended({"I1"}, True)
    with path.open("a", encoding="utf-8") as file:
        file.write('{"event": "story", "co')
    assert reader.new_events() == [
        {"event": "started", "code": "I1"},
        {"event": "story", "code": "I1", "stories": 1, "failed": 1},
    ]
    with path.open("a", encoding="utf-8") as file:
        file.write('de": "I2", "stories": 1, "failed": 0}\n')
    assert reader.new_events() == [{"event": "story", "code": "I2", "stories": 1, "failed": 0}]


PLUGIN_TEST = '''
import pytest

from properties.catalog import BY_CODE
from properties.story.playback import story_machine
from properties.story.record import Counterexample


@pytest.mark.parametrize("prop", [BY_CODE["I1"]], ids=["I1"])
def test_a_story(prop):
    recorded = Counterexample.load({folder!r})
    machine = story_machine(**recorded.machine)
    failed = None
    try:  # as Hypothesis plays a story: the steps, then teardown whatever happened
        for step in recorded.steps:
            if step.rule != "teardown":
                getattr(machine, step.rule)(**step.arguments)
    except Exception as failure:
        failed = failure
    finally:
        machine.teardown()
    assert failed is not None
'''


def test_the_plugin_writes_each_search_s_start_and_stories(tmp_path):
    folder = _found_here()
    (tmp_path / "test_story.py").write_text(PLUGIN_TEST.format(folder=str(folder)),
                                            encoding="utf-8")
    progress_file = tmp_path / "progress.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "harness.tools.pytest_plugin", f"--hitl-progress-file={progress_file}",
         "test_story.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert search_progress.Reader(progress_file).new_events() == [
        {"event": "started", "code": "I1"},
        {"event": "story", "code": "I1", "stories": 1, "failed": 1},
    ]

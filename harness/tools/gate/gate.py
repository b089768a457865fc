"""The gate itself: every input checked, then the baseline and every SPEC
through environment, pre-gate (probe and replayed counterexamples) and
suite, each candidate compared with the baseline and the known violations.

The process work runs on anyio: the environments are built side by side
in a task group (at most :data:`BUILDS_AT_ONCE` at a time) while the
releases are gated one after the other, each suite within its budget
(:mod:`.processes`); :mod:`.progress` shows where it is.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc

from harness.world.deployment import Deployment

from . import compare, environments, inputs, junit, pregate, progress, reports, runner
from .outcomes import Exit, Row, exit_code
from .shards import Shard

#: Environments built at the same time.
BUILDS_AT_ONCE = 2


def _say(message: str) -> None:
    """A line on stderr (the table goes to stdout)."""
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    """How each release is gated."""

    with_fix: bool
    profile: str
    counterexamples: Path
    workers: int
    budget: float | None  # seconds a suite may take; None: no budget
    corpus: tuple[Path, ...]  # the counterexample folders the pre-gate replays
    deployment: tuple[str, ...] = ()  # e.g. ("--hitl-bus", "redis", "--hitl-nodes", "2")
    #: The user's patch layer (``--patch``): a module name or an absolute
    #: path, as every environment's process can import it; None: none.
    patch: str | None = None

    @property
    def layer(self) -> dict[str, str]:
        """The patch layer's name and digest (``{}``: none)."""
        if self.patch is None:
            return {}
        from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

        return patch_layer.find(self.patch).record()

    def key(self, target) -> str:
        """What a release's durations are kept under (the ETA's history)."""
        return (f"{target.identity} profile={self.profile} fix={self.with_fix} "
                f"workers={self.workers}" + "".join(f" {a}" for a in self.deployment)
                + (f" patch={self.layer['digest']}" if self.patch else ""))


def gate(
    spec_texts: list[str],
    *,
    with_fix: bool = False,
    profile: str = "ci",
    counterexamples: Path = Path("counterexamples"),
    workers: int = 2,
    json_path: Path | None = None,
    junit_path: Path | None = None,
    baseline: str | None = None,
    baseline_json: Path | None = None,
    known: Path | None = None,
    shard: Shard | None = None,
    budget: float | None = None,
    corpus: Path | None = None,
    live: bool | None = None,
    deployment: tuple[str, ...] = (),
    patch: str | None = None,
) -> Exit:
    """Gate every SPEC (against the baseline, if any); print the table;
    return the exit code. Every input is checked before any work.
    ``budget`` is in minutes, per release; ``corpus`` is the folder of
    counterexamples the pre-gate replays (the project's committed ones by
    default); ``live`` forces the live display on or off (default: on a
    terminal); ``deployment`` are the suite's ``--hitl-bus``/``--hitl-nodes``
    options; ``patch`` the user's patch layer (checked by the command line),
    installed in every release's pre-gate and suite."""
    try:
        refusal = pregate.check_corpus(corpus)
        if refusal is not None:
            raise inputs.Refused(refusal)
        plan = inputs.prepare(
            spec_texts, baseline=baseline, baseline_json=baseline_json, known_path=known,
            json_path=json_path, junit_path=junit_path, counterexamples=counterexamples,
            shard=shard,
        )
    except inputs.Refused as refused:
        _say(f"hitl-harness gate: error: {refused}")
        return refused.code
    if shard is not None:
        _say(f"shard {shard}: {', '.join(t.name for t in plan.candidates) or 'no release'}")
    corpus = corpus or pregate.default_corpus()
    options = Options(
        with_fix=with_fix, profile=profile, counterexamples=counterexamples, workers=workers,
        budget=budget * 60 if budget is not None else None,
        corpus=tuple(pregate.folders(corpus)), deployment=deployment, patch=patch,
    )
    rows: list[Row] = []
    try:
        anyio.run(_gate_all, plan, options, live, rows)
        code = exit_code(rows)
    except KeyboardInterrupt:  # what finished is kept; the rest is marked
        rows = _interrupted(plan, rows)
        code = Exit.INTERRUPTED
        _say("hitl-harness gate: interrupted (Ctrl-C)"
             + ("; the JSON and JUnit mark what did not finish" if json_path or junit_path else ""))
    print()
    layer = options.layer
    print(reports.render(rows, code, profile=profile, with_fix=with_fix, corpus=_shown(corpus),
                         patch=layer))
    if json_path is not None:
        reports.write_json(rows, json_path, code, profile=profile, with_fix=with_fix,
                           shard=str(shard) if shard else None, corpus=str(_shown(corpus)),
                           **({"patch": layer} if layer else {}))
    if junit_path is not None:
        junit.write_junit(rows, junit_path)
    return code


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it lies under it."""
    path = path.absolute()
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


class _Build:
    """One environment, built (or found in the cache) once for every
    release that needs it."""

    def __init__(self, target):
        self.target = target
        self.done = anyio.Event()
        self.env: environments.Environment | None = None
        self.failure: str | None = None
        self.seconds = 0.0

    async def run(self, limiter: anyio.CapacityLimiter, display: progress.Display) -> None:
        name = self.target.name
        started = time.monotonic()
        try:
            self.env = environments.cached(self.target)
            if self.env is None:
                async with limiter:
                    self.env = await environments.ensure(
                        self.target, say=lambda line: display.building(name, line),
                    )
        except environments.InstallFailed as failed:
            self.failure = str(failed)
        except OSError as failed:
            self.failure = f"{type(failed).__name__}: {failed}"
        finally:
            self.seconds = round(time.monotonic() - started, 1)
            display.built(name)
            self.done.set()


class _Builds:
    """The environments of every release, built side by side (at most
    :data:`BUILDS_AT_ONCE` at a time) in the gate's task group, all started
    when the first release needs its own."""

    def __init__(self, targets, work: anyio.abc.TaskGroup, display: progress.Display):
        self.builds = {target.identity: _Build(target) for target in targets}
        self.work, self.display = work, display
        self.started = False

    async def of(self, target) -> _Build:
        """``target``'s build, once it is done."""
        if not self.started:
            self.started = True
            limiter = anyio.CapacityLimiter(BUILDS_AT_ONCE)
            for build in self.builds.values():
                self.work.start_soon(build.run, limiter, self.display)
        build = self.builds[target.identity]
        if not build.done.is_set():
            self.display.phase(target.name, progress.BUILDING)
            await build.done.wait()
        return build


def _interrupted(plan: inputs.Plan, rows: list[Row]) -> list[Row]:
    """``rows`` (those that finished), then every release of ``plan`` that
    did not, each marked interrupted."""
    finished = {row.name for row in rows}
    order = [*([plan.baseline] if plan.baseline is not None else []), *plan.candidates]
    return rows + [
        Row(target.name).could_not_run(Exit.INTERRUPTED, "Ctrl-C before it finished")
        for target in order if target.name not in finished
    ]


async def _gate_all(plan: inputs.Plan, options: Options, live: bool | None,
                    rows: list[Row]) -> None:
    """Every release of ``plan`` gated, the baseline first, into ``rows``
    (which keep what finished when the gate is interrupted); the
    environments are built side by side while the releases run in turn."""
    order = [*([plan.baseline] if plan.baseline is not None else []), *plan.candidates]
    unique = list({target.identity: target for target in reversed(order)}.values())[::-1]
    history = progress.History(environments.cache_root() / "timings.json")
    display = progress.Display([(t.name, options.key(t)) for t in unique], history, live=live)
    ran: dict[str, Row] = {}
    rows.extend([plan.baseline_row] if plan.baseline_row is not None else [])
    base = plan.baseline_row
    async with display, anyio.create_task_group() as work:
        work.start_soon(display.heartbeat)
        builds = _Builds(unique, work, display)
        for number, target in enumerate(order):
            is_baseline = plan.baseline is not None and number == 0
            if target.identity in ran:  # ran once already
                row = replace(ran[target.identity], name=target.name, role="candidate", new=None)
            else:
                row = await _gate_one(target, options=options, builds=builds, display=display,
                                      history=history)
                ran[target.identity] = row
            if is_baseline:
                row.role, row.new = "baseline", []
                base = row
            elif row.verdicts:
                compare.classify(row, base, plan.known, Deployment.from_options(options.deployment))
            rows.append(row)
        work.cancel_scope.cancel()


def _relative(verdict: dict) -> dict:
    """A verdict whose counterexample folders (its own, and what its search
    found on the way) are relative to the working directory when they lie
    under it (:func:`.reports.under_cwd`)."""
    also = {code: reports.under_cwd(folder)
            for code, folder in (verdict.get("also_found") or {}).items()}
    return {**verdict, "counterexample": reports.under_cwd(verdict.get("counterexample")),
            "also_found": also}


async def _gate_one(target, *, options: Options, builds: _Builds,
                    display: progress.Display, history: progress.History) -> Row:
    """One release through its environment, pre-gate and suite."""
    row = Row(name=target.name, version=target.version or None)
    display.start(target.name)
    try:
        return await _run_one(row, target, await builds.of(target), options, display, history)
    finally:
        display.phase(target.name, progress.DONE)


async def _run_one(row: Row, target, build: _Build, options: Options,
                   display: progress.Display, history: progress.History) -> Row:
    say = lambda message: display.say(target.name, message)  # noqa: E731
    key = options.key(target)
    if build.failure is not None:
        say(f"install failed: {build.failure}")
        return row.could_not_run(Exit.INSTALL_FAILED, build.failure)
    env = build.env
    row.seconds["environment"] = build.seconds
    say(f"environment {'reused from the cache' if env.cached else 'built'} "
        f"in {row.seconds['environment']} s: {env.folder}")
    display.phase(target.name, progress.PREGATE)
    started = time.monotonic()
    found, row.pregate = await pregate.run(env, list(options.corpus), with_fix=options.with_fix,
                                           environ=runner.environ(), patch=options.patch)
    row.seconds["pregate"] = round(time.monotonic() - started, 1)
    row.version, row.path = found.get("version") or row.version, found.get("path")
    if not found.get("drivable"):
        say(f"cannot drive agentscope {row.version}: {found.get('missed')}")
        return row.could_not_run(Exit.CANNOT_DRIVE, found.get("missed") or "unknown")
    if found.get("patch_refusal"):  # the layer does not import on this release
        say(found["patch_refusal"])
        return row.could_not_run(Exit.RUN_BROKE, found["patch_refusal"])
    history.record(key, "pregate", row.seconds["pregate"])
    if row.pregate:
        say(f"pre-gate in {row.seconds['pregate']} s: {pregate.summary(row.pregate)}")
        for line in pregate.details(row.pregate):
            say(f"pre-gate: {line}")
    apply_fix = options.with_fix and not found.get("fix_refusal")
    row.fix = (
        f"on ({','.join(found.get('fix_covers') or [])})"
        if apply_fix
        else ("n/a" if options.with_fix else "off")
    )
    if options.with_fix and not apply_fix:
        say(f"reference fix not applied: {found['fix_refusal']}")
    if apply_fix:
        say(f"reference fixes applied: {', '.join(found.get('fix_applies') or [])}")
        for refused in found.get("fix_refused") or []:  # a fix applies whole or not at all
            say(f"reference fix {refused}")
    budget = f", budget {runner.minutes(options.budget)}" if options.budget is not None else ""
    layer = f", patch layer {found['patch']}" if found.get("patch") else ""
    say(f"running the properties on agentscope {row.version} at {row.path} "
        f"(profile {options.profile}, reference fix {row.fix}{layer}{budget})")
    display.phase(target.name, progress.PROPERTIES)
    display.suite_has(target.name, found.get("properties") or 0)
    started = time.monotonic()
    result = await runner.run_suite(
        env.python, log=env.folder / "last-run.log", profile=options.profile,
        with_fix=apply_fix, counterexamples=options.counterexamples, workers=options.workers,
        say=lambda verdict: display.verdict(target.name, verdict),
        budget=options.budget,
        on_event=lambda event: display.event(target.name, event),
        deployment=options.deployment + (("--hitl-patch", options.patch) if options.patch else ()),
    )
    row.seconds["suite"] = round(time.monotonic() - started, 1)
    if result.did_not_finish:
        say(f"did not finish: {result.broken}")
        return row.could_not_run(Exit.DID_NOT_FINISH, result.broken)
    row.verdicts = {code: _relative(v) for code, v in result.verdicts.items()}
    if result.broken is not None:
        say(result.broken)
        return row.could_not_run(Exit.RUN_BROKE, result.broken)
    history.record(key, "suite", row.seconds["suite"])
    row.judge()
    say(f"done in {row.seconds['suite']} s")
    return row

"""What the gate is doing while it works, for the person (or the CI log)
watching it.

On a terminal a live display (rich) on stderr: ``[n/N]`` releases, the
release's phase (building the environment, pre-gate, property k of N and
which searches are shrinking), the time elapsed and an ETA from earlier
runs, and a line per environment being built; what is said (each verdict,
the pre-gate's result, uv's lines) scrolls above it. Not on a terminal,
plain lines: one per phase change, and a line every :data:`HEARTBEAT`
seconds when nothing else was said, so a CI log never goes quiet for
minutes.

The ETA comes from :class:`History`: the time each release's pre-gate and
suite took on earlier runs (the median of the last :data:`KEPT`), stored in
the gate's cache folder.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..search_progress import STARTED, STORY

#: Seconds of silence after which plain output says where the gate is.
HEARTBEAT = 60.0

#: Durations kept per release and phase.
KEPT = 5

#: A release's phases, in order.
WAITING, BUILDING, PREGATE, PROPERTIES, DONE = (
    "waiting", "building the environment", "pre-gate", "properties", "done",
)

#: The phases whose earlier durations make the ETA, and the names they are
#: kept under in :class:`History`.
TIMED = {PREGATE: "pregate", PROPERTIES: "suite"}


def clock(seconds: float) -> str:
    """``1:05``, ``1:02:03``."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class History:
    """Earlier runs' durations, per release (its key) and phase, in
    ``timings.json`` of the gate's cache folder."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.runs: dict[str, dict[str, list[float]]] = json.loads(
                path.read_text(encoding="utf-8"),
            )
        except (OSError, ValueError):
            self.runs = {}

    def estimate(self, key: str, phase: str) -> float | None:
        """The median of the kept durations, or ``None`` if there are none."""
        kept = self.runs.get(key, {}).get(phase)
        return statistics.median(kept) if kept else None

    def record(self, key: str, phase: str, seconds: float) -> None:
        """Keep ``seconds`` (the last :data:`KEPT` per phase) and save."""
        kept = self.runs.setdefault(key, {}).setdefault(phase, [])
        kept[:] = [*kept, round(seconds, 1)][-KEPT:]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.runs, indent=1, sort_keys=True) + "\n",
                                 encoding="utf-8")
        except OSError:
            pass  # no ETA next time; the gate itself is not affected


@dataclass
class Release:
    """One release's progress."""

    name: str
    key: str
    number: int  # 1-based, as [n/N] says it
    phase: str = WAITING
    phase_started: float | None = None
    started: float | None = None
    building: str | None = None  # the build's last line, while it builds
    build_started: float | None = None
    properties: int = 0  # how many the suite has
    searching: list[str] = field(default_factory=list)  # started, no verdict yet
    done: list[str] = field(default_factory=list)
    stories: dict[str, int] = field(default_factory=dict)
    shrinking: set[str] = field(default_factory=set)


class Display:
    """The gate's progress (see the module); ``live`` is decided from
    ``stream`` when not given (a terminal that is not dumb)."""

    def __init__(self, releases: list[tuple[str, str]], history: History, *,
                 live: bool | None = None, stream=None, now: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.history = history
        self.now = now
        self.began = now()
        self.releases = {
            name: Release(name, key, number)
            for number, (name, key) in enumerate(releases, 1)
        }
        self.current: Release | None = None
        self._last_said = self.began
        self._console = None
        self._live = None
        if live is None:
            from rich.console import Console  # pylint: disable=import-outside-toplevel

            console = Console(file=self.stream, stderr=self.stream is sys.stderr)
            live = console.is_terminal and not console.is_dumb_terminal
        self.is_live = live

    # ── lifetime ──────────────────────────────────────────────────────

    async def __aenter__(self) -> Display:
        if self.is_live:
            from rich.console import Console  # pylint: disable=import-outside-toplevel
            from rich.live import Live  # pylint: disable=import-outside-toplevel

            self._console = Console(file=self.stream, force_terminal=True)
            self._live = Live(console=self._console, get_renderable=self._render,
                              refresh_per_second=4, transient=True, redirect_stdout=False,
                              redirect_stderr=False)
            self._live.start()
        return self

    async def __aexit__(self, *_exc) -> None:
        if self._live is not None:
            self._live.stop()

    async def heartbeat(self) -> None:
        """Plain output: where the gate is, after :data:`HEARTBEAT` seconds
        in which nothing was said (run it in a task group; it never ends)."""
        while True:
            await anyio.sleep(HEARTBEAT / 4)
            if not self.is_live and self.now() - self._last_said >= HEARTBEAT:
                self._write(f"{self.status_line()} (still working)")

    # ── what the gate tells it ────────────────────────────────────────

    def say(self, name: str, message: str) -> None:
        """A line that stays (a verdict, the pre-gate, what uv did)."""
        self._write(f"[{name}] {message}")

    def building(self, name: str, line: str) -> None:
        """A line of an environment build: shown as the build's state
        (live), said (plain; not the list of installed packages)."""
        release = self.releases[name]
        if release.build_started is None:
            release.build_started = self.now()
        release.building = line
        if not self.is_live and not line.lstrip().startswith(("uv: + ", "uv: - ", "uv: ~ ")):
            self.say(name, line)

    def built(self, name: str) -> None:
        self.releases[name].building = None

    def start(self, name: str) -> None:
        """``name`` is the release being gated now."""
        self.current = self.releases[name]
        self.current.started = self.now()

    def phase(self, name: str, phase: str) -> None:
        """``name`` entered ``phase`` (:data:`BUILDING`, :data:`PREGATE`,
        :data:`PROPERTIES`, :data:`DONE`)."""
        release = self.releases[name]
        release.phase, release.phase_started = phase, self.now()
        if not self.is_live and phase != DONE:
            self._write(self.status_line(release))

    def suite_has(self, name: str, properties: int) -> None:
        self.releases[name].properties = properties

    def event(self, name: str, event: dict) -> None:
        """A progress event of the suite (:mod:`harness.tools.search_progress`)."""
        release, code = self.releases[name], event.get("code")
        if event.get("event") == STARTED and code not in release.searching + release.done:
            release.searching.append(code)
            if not self.is_live:
                self._write(self.status_line(release))
        elif event.get("event") == STORY:
            release.stories[code] = event.get("stories", 0)
            if event.get("failed") and code not in release.shrinking and code not in release.done:
                release.shrinking.add(code)
                if not self.is_live:
                    self._write(f"{self.status_line(release)} ({code} failed a story: "
                                "shrinking it)")

    def verdict(self, name: str, verdict: str) -> None:
        """A property's verdict came (``I5 VIOLATED ...``)."""
        release = self.releases[name]
        code = verdict.split()[0] if verdict.split() else ""
        if code in release.searching:
            release.searching.remove(code)
        release.shrinking.discard(code)
        release.done.append(code)
        self.say(name, verdict)

    # ── what it shows ─────────────────────────────────────────────────

    def doing(self, release: Release) -> str:
        """The release's phase in words: ``property 5 of 15: I5 (37
        stories), I6 shrinking``."""
        if release.phase != PROPERTIES:
            return release.phase
        under_way = [
            f"{code} shrinking" if code in release.shrinking
            else f"{code} ({release.stories.get(code, 0)} stories)"
            for code in release.searching
        ]
        count = len(release.done) + len(release.searching)
        if not count:
            return "properties: the suite is starting"
        total = f" of {release.properties}" if release.properties else ""
        return f"property {count}{total}" + (f": {', '.join(under_way)}" if under_way else "")

    def eta(self) -> str:
        """``ETA 3:10`` from earlier runs: what is left of each release's
        pre-gate and suite (of the phase under way, its estimate less the
        time it has taken so far)."""
        now, left, unknown = self.now(), 0.0, []
        order = list(TIMED)
        for release in self.releases.values():
            if release.phase == DONE:
                continue
            position = order.index(release.phase) if release.phase in order else -1
            for phase in order[max(position, 0):]:
                estimate = self.history.estimate(release.key, TIMED[phase])
                if estimate is None:
                    unknown.append(release.name)
                    break
                taken = now - (release.phase_started or now) if phase == release.phase else 0.0
                left += max(estimate - taken, 0.0)
        if unknown:
            more = f" and {len(unknown) - 1} more" if len(unknown) > 2 else ""
            named = unknown[0] if more else ", ".join(unknown)
            return f"ETA unknown (no earlier run of {named}{more})"
        return f"ETA {clock(left)}" if left >= 1 else "ETA any moment now"

    def status_line(self, release: Release | None = None) -> str:
        """``[1/2 2.0.8] 2:31 elapsed · ETA 1:40 · property 5 of 15: I5 (37
        stories)`` (the times first: a narrow terminal cuts the end)."""
        release = release or self.current
        elapsed = f"{clock(self.now() - self.began)} elapsed"
        if release is None:
            return f"[gate] {elapsed}"
        head = f"[{release.number}/{len(self.releases)} {release.name}]"
        return f"{head} {elapsed} · {self.eta()} · {self.doing(release)}"

    def _render(self):
        from rich.text import Text  # pylint: disable=import-outside-toplevel

        lines = [self.status_line()]
        for release in self.releases.values():
            if release.building is not None:
                took = clock(self.now() - (release.build_started or self.now()))
                lines.append(f"  {release.name}: building the environment ({took}): "
                             f"{release.building}")
        width = self._console.width if self._console is not None else 100
        return Text("\n".join(line[: width - 1] for line in lines), no_wrap=True)

    def _write(self, line: str) -> None:
        self._last_said = self.now()
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self.stream, flush=True)

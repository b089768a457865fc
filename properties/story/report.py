"""``report.md``: a failing story as a bug report a maintainer can act on
without running anything."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .diagram import sequence_diagram
from .environment import environment_lines
from .narration import narrate
from .record import Counterexample

#: The timeline in ``report.md`` shows this many last operations (a story
#: with a crashed run can make tens of thousands of dispatcher retries);
#: ``story.json`` keeps them all.
TIMELINE_LINES = 400


@dataclass(frozen=True)
class NamedFinding:
    """The finding a story shows, as the harness's known list names it
    (``finding`` empty: no entry covers it), with the scripts that confirm
    it outside the harness and its upstream reports (paths in the
    harness's repository, ``root``)."""

    finding: str
    title: str
    confirmed_by: tuple[Path, ...]
    upstream: tuple[Path, ...]
    root: Path

    def line(self, folder: Path | None) -> str:
        """``- **Finding F1:** title. Confirmed by [...](...); upstream report [...](...).``,
        linked relative to ``folder`` when it lies in the repository."""
        if not self.finding:
            return ("- **Finding:** none that the harness's known list (`docs/findings/known.json`) "
                    "covers: a new violation, or a known one on a release its entry does not "
                    "list. Confirm it outside the harness before reporting it.")
        confirmed = ", ".join(self._link(p, folder) for p in self.confirmed_by) or "no script yet"
        upstream = ", ".join(self._link(p, folder) for p in self.upstream) or "none written"
        title = f" {self.title}." if self.title else ""
        return (f"- **Finding {self.finding}:**{title} Confirmed outside the harness by "
                f"{confirmed}; upstream report: {upstream}.")

    def _link(self, path: Path, folder: Path | None) -> str:
        inside = folder is not None and folder.resolve().is_relative_to(self.root)
        if inside:
            return f"[`{path.name}`]({os.path.relpath(path, folder.resolve())})"
        return f"`{path.relative_to(self.root)}` (in the harness's repository)"


def render_report(self: Counterexample, finding: NamedFinding | None = None,
                  folder: Path | None = None) -> str:
    """``report.md``: paste into an issue as it is; with the finding it
    shows, when the harness knows, linked from ``folder``."""
    fix = (f" with the harness's reference fixes {', '.join(self.fixes)} applied" if self.fixes
           else " with the harness's reference fix applied" if self.reference_fix else "")
    story = "\n".join(
        f"{n}. {narrate(s.rule, s.arguments, self.machine.get('streaming', False))}"
        for n, s in enumerate(self.steps, 1)
    )
    timeline = self.trace.strip("\n").splitlines()
    if len(timeline) > TIMELINE_LINES:
        omitted = len(timeline) - TIMELINE_LINES
        timeline = [f"     ({omitted} earlier operations omitted; story.json has them all)"] + timeline[-TIMELINE_LINES:]
    events = "\n".join(
        f"- **{session}**: " + (" → ".join(kinds) if kinds else "(none)")
        for session, kinds in self.events.items()
    )
    world, jobs, streaming = _world_in_words(self)
    environment = "\n".join(environment_lines(
        self.agentscope_version, self.agentscope_path, fix, self.agentscope_source,
        self.patch,
    ))
    headline = self.failure.strip().splitlines()[0] if self.failure.strip() else self.code
    picture = sequence_diagram(self.trace, headline)
    return f"""# agentscope {self.agentscope_version}: {self.code} violated — {self.title}

{environment}
- **Property {self.code}:** {self.statement}
{finding.line(folder) + chr(10) if finding is not None else ""}- **Found by:** agentscope-hitl-harness, a property-based test of agentscope's
  human-in-the-loop runs; the failing story it found was shrunk to the {len(self.steps)} steps below.
- **Reproduce:** `pytest test_repro.py` (this folder), or `hitl-harness replay <this folder>`.

## What went wrong

The check failed at step {len(self.steps)}:

```
{self.failure.strip()}
```

## The race, as a picture

Who touched the bus, in order, for the operations that matter to the inbox
hand-off (the full timeline is at the end):

```mermaid
{picture}
```

## Steps to reproduce

The world: {world}, each an agentscope
`Agent` driven by agentscope's own `ChatService`, chat endpoint, run registry,
`WakeupDispatcher` and `CancelDispatcher`. Only the boundaries are fakes: the message bus (Redis semantics on a
virtual clock), the model (scripted turns) and the tools (`GatedAction` asks the user to
confirm, `ExternalJob` waits for an external result{jobs}).{streaming}

{story}

In code (each a rule of the harness's story machine; `test_repro.py` replays them):

```python
{chr(10).join(s.call() for s in self.steps)}
```

## Events each session published, in order

{events}

## Timeline of bus operations, by task, up to the failure

Each line: sequence number, the task, the bus operation, its key, and what it returned or
published. Tasks: `chat-run:<session>` is a run the chat endpoint spawned, `wake-run:<session>`
and `resume-run:<session>` ones the wake-up dispatcher spawned, `wakeup-dispatcher` is
agentscope's dispatcher loop, `cancel-dispatcher:interrupt` the cancel dispatcher's loop that
cancels a session's run when an interrupt is published (`receive`: the interrupt reaches it),
and `» ...` is a party the harness plays (a user, a producer).

```
{chr(10).join(timeline)}
```
"""


def _world_in_words(self: Counterexample) -> tuple[str, str, str]:
    """Who is in the story, the extra tool, and whether model calls
    pause mid-answer: as the story's machine was configured."""
    world = "a team leader, a worker it can invite, and a solo session"
    if self.machine.get("several_teams"):
        world = (
            "two teams (a leader with two workers it can invite, a chief with "
            "one) and a solo session"
        )
    jobs = (
        ", `BackgroundJob` runs until the story finishes it"
        if self.machine.get("background_jobs") else ""
    )
    streaming = (
        " Every model call can be held mid-answer (`model_call` in the timeline)."
        if self.machine.get("streaming") else ""
    )
    return world, jobs, streaming

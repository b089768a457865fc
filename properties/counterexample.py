"""A failing story, written down for a person and for a replay.

When a step of :class:`~properties.machine.HitlMachine` fails (an invariant
is violated, or agentscope raises), the machine attaches a
:class:`Counterexample` to the exception: the story's steps with their
concrete arguments, the machine's configuration, the bus trace up to the
failure and the agentscope under test. Hypothesis re-raises the exception of
its final, shrunk run, so the attached story is the shrunk one.

:meth:`Counterexample.write` turns it into a folder
``<parent>/<property>-<short id>/`` holding

- ``report.md``: a bug report a maintainer can act on without running it;
- ``test_repro.py``: a standalone pytest file replaying exactly those steps
  (no Hypothesis generation), failing while the bug is there;
- ``story.json``: the same story, machine-readable, for ``hitl-harness
  replay``.
"""
from __future__ import annotations

import hashlib
import json
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Where counterexample folders go unless told otherwise.
DEFAULT_PARENT = "counterexamples"

#: The timeline in ``report.md`` shows this many last operations (a story
#: with a crashed run can make tens of thousands of dispatcher retries);
#: ``story.json`` keeps them all.
TIMELINE_LINES = 400


@dataclass(frozen=True)
class Step:
    """One step of a story: a rule of the machine and its arguments."""

    rule: str
    arguments: dict = field(default_factory=dict)

    def call(self) -> str:
        """The step as Python: ``rule(name=value, ...)``."""
        rendered = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.rule}({rendered})"


@dataclass
class Counterexample:
    """A failing story and everything a report needs about it."""

    code: str
    title: str
    statement: str
    failure: str
    steps: list[Step]
    machine: dict
    trace: str
    events: dict[str, list[str]]
    agentscope_version: str
    agentscope_path: str
    reference_fix: bool
    error_type: str = "InvariantViolated"

    @property
    def short_id(self) -> str:
        """Eight hex digits that name this story on this agentscope."""
        key = json.dumps(
            [
                self.code,
                [asdict(s) for s in self.steps],
                self.machine,
                self.agentscope_version,
                self.reference_fix,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(key.encode()).hexdigest()[:8]

    @property
    def name(self) -> str:
        """The folder name: ``<property>-<short id>``."""
        return f"{self.code}-{self.short_id}"

    def write(self, parent: str | Path = DEFAULT_PARENT) -> Path:
        """Write the folder (replacing an older copy) and return its path."""
        folder = Path(parent) / self.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "story.json").write_text(self.to_json(), encoding="utf-8")
        (folder / "report.md").write_text(self.report(), encoding="utf-8")
        (folder / "test_repro.py").write_text(self.repro(), encoding="utf-8")
        return folder

    # ── serialisation ─────────────────────────────────────────────────

    def to_json(self) -> str:
        """The story, machine-readable (what ``replay`` reads)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, folder: str | Path) -> Counterexample:
        """Read a folder written by :meth:`write`."""
        data = json.loads((Path(folder) / "story.json").read_text(encoding="utf-8"))
        data["steps"] = [Step(**s) for s in data["steps"]]
        return cls(**data)

    # ── the report ────────────────────────────────────────────────────

    def report(self) -> str:
        """``report.md``: paste into an issue as it is."""
        from .narration import narrate  # pylint: disable=import-outside-toplevel

        fix = " with the harness's reference fix applied" if self.reference_fix else ""
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
        world, jobs, streaming = self._world_in_words()
        return f"""# agentscope {self.agentscope_version}: {self.code} violated — {self.title}

- **agentscope under test:** {self.agentscope_version}, imported from `{self.agentscope_path}`{fix}
- **Property {self.code}:** {self.statement}
- **Found by:** agentscope-hitl-harness, a property-based test of agentscope's
  human-in-the-loop runs; Hypothesis shrank the failing story to the {len(self.steps)} steps below.
- **Reproduce:** `pytest test_repro.py` (this folder), or `hitl-harness replay <this folder>`.

## What went wrong

The check failed at step {len(self.steps)}:

```
{self.failure.strip()}
```

## Steps to reproduce

The world: {world}, each an agentscope
`Agent` driven by agentscope's own `ChatService`, chat endpoint, run registry,
`WakeupDispatcher` and `CancelDispatcher`. Only the boundaries are fakes: the message bus (Redis semantics on a
virtual clock), the model (scripted turns) and the tools (`GatedAction` asks the user to
confirm, `ExternalJob` waits for an external result{jobs}).{streaming}

{story}

In code (each a rule of `properties.machine.HitlMachine`; `test_repro.py` replays them):

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

    # ── the replay ────────────────────────────────────────────────────

    def _world_in_words(self) -> tuple[str, str, str]:
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

    def repro(self) -> str:
        """``test_repro.py``: the steps as plain calls, no Hypothesis."""
        from .narration import narrate  # pylint: disable=import-outside-toplevel

        configuration = "".join(
            f"\n        {k}={v!r}," for k, v in sorted(self.machine.items())
        )
        body = []
        for n, step in enumerate(self.steps, 1):
            if step.rule == "teardown":
                continue  # the end of the ``with`` block settles and checks
            body.extend(
                textwrap.wrap(
                    f"{n}. {narrate(step.rule, step.arguments, self.machine.get('streaming', False))}",
                    width=88,
                    initial_indent="        # ",
                    subsequent_indent="        #    ",
                ),
            )
            body.append(f"        story.{step.call()}")
        steps = "\n".join(body) or "        pass"
        return f'''"""{self.code} ({self.title}): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope {self.agentscope_version}
(reference fix {"on" if self.reference_fix else "off"}). This test plays the shrunk story
step by step on a fresh world and checks {self.code} after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                  # against the agentscope `import agentscope` finds
    pytest test_repro.py --reference-fix  # with the harness's reference fix applied
"""
from properties.replay import playing


def test_{self.code}_{self.short_id}():
    with playing({configuration}
    ) as story:
{steps}
'''

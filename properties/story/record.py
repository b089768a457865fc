"""A failing story, written down: the record every other part reads.

When a step of the machine fails (a property is violated, or agentscope
raises), the machine attaches a :class:`Counterexample` to the exception
(:mod:`.witness`): the story's steps with their concrete arguments, the
machine's configuration, the bus trace up to the failure and the agentscope
under test. The property suite raises the failure of the shrunk story
(:mod:`.shrink`), so the attached story is the shrunk one.

``story.json`` is this record as JSON, with a schema version: :data:`SCHEMA`
is what this harness writes; a folder with no version is version 1 (before
the version was written; the same fields). A newer version is refused, not
misread. :mod:`.folder` writes the whole folder; :mod:`.report` and
:mod:`.repro` render its two other files.

A story's id (:attr:`Counterexample.short_id`) hashes everything that
makes the program it ran: the steps, the machine's options, the deployment,
the agentscope release, a checkout's source digest, the names of the
reference fixes applied and the user's patch layer (its name and digest,
only when one was installed). Two stories with one id are one story.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.world.deployment import Deployment

from ..violation import expected_and_actual

#: The version of ``story.json`` this harness writes (3: with the
#: Hypothesis that drew the story; 4: with the names of the fixes applied
#: and a checkout's source digest, which its id covers).
SCHEMA = 4

#: The version written for a story found with the user's own patch layer
#: installed (``patch``: its name and digest, which its id covers); a
#: story without one is still :data:`SCHEMA`, its id unchanged.
SCHEMA_WITH_PATCH = 5

#: Versions it can read.
READABLE = (1, 2, 3, 4, 5)


class UnreadableStory(ValueError):
    """``story.json`` is missing, malformed, or from a newer harness."""


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
    #: The Hypothesis that drew the story ("" before format 3); a replay
    #: under another one says so, as its search may go another way.
    hypothesis_version: str = ""
    #: The reference fixes applied, by name ([] before format 4, whatever
    #: ``reference_fix`` says).
    fixes: list[str] = field(default_factory=list)
    #: A source checkout's digest (``sha256:...``, of its ``.py`` files);
    #: "" for an installed distribution, and before format 4.
    agentscope_source: str = ""
    #: The user's own patch layer installed over agentscope (``--patch``):
    #: ``{"name": ..., "digest": "sha256:..."}``; ``{}`` when none was.
    patch: dict = field(default_factory=dict)

    def identity(self) -> str:
        """What the id hashes, as JSON: the property, the steps, the
        machine's options, the deployment (bus, nodes), the agentscope
        release and a checkout's source, and the fixes applied."""
        return json.dumps(
            {
                "code": self.code,
                "steps": [asdict(s) for s in self.steps],
                "machine": self.machine,
                "deployment": Deployment.from_configuration(self.machine).record(),
                "agentscope": self.agentscope_version,
                "source": self.agentscope_source,
                "fixes": self.fixes,
                "reference_fix": self.reference_fix,
                # Only when given: a story without a layer keeps its id.
                **({"patch": self.patch} if self.patch else {}),
            },
            sort_keys=True,
        )

    @property
    def short_id(self) -> str:
        """Eight hex digits that name this story on this program."""
        return hashlib.sha256(self.identity().encode()).hexdigest()[:8]

    def same_program(self, other: Counterexample) -> bool:
        """Whether ``other`` ran on the program this story was found on: the
        same release, fixes and checkout source (those this story records:
        a story from before format 4 names no fixes nor source)."""
        return (
            other.agentscope_version == self.agentscope_version
            and other.reference_fix == self.reference_fix
            and (not self.fixes or other.fixes == self.fixes)
            and (not self.agentscope_source or other.agentscope_source == self.agentscope_source)
            and other.patch == self.patch
        )

    def expected_and_actual(self) -> tuple[str, str]:
        """What was expected and what happened, in words: a violation's own
        two lines, or for any other failure the story's statement and the
        failure."""
        return expected_and_actual(self.failure) or (self.statement, self.failure.strip())

    @property
    def name(self) -> str:
        """The folder name: ``<property>-<short id>``."""
        return f"{self.code}-{self.short_id}"

    def to_json(self) -> str:
        """The story, machine-readable (what ``replay`` reads)."""
        data = asdict(self)
        if not self.patch:  # absent, as in every story before the option
            del data["patch"]
        schema = SCHEMA_WITH_PATCH if self.patch else SCHEMA
        return json.dumps({"schema": schema, **data}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, folder: str | Path) -> Counterexample:
        """Read the ``story.json`` of a counterexample folder."""
        path = Path(folder) / "story.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as unreadable:
            raise UnreadableStory(f"cannot read {path}: {unreadable}") from None
        if not isinstance(data, dict):
            raise UnreadableStory(f"{path} holds no story")
        version = data.pop("schema", 1)
        if version not in READABLE:
            raise UnreadableStory(
                f"{path} is story format {version}; this harness reads {list(READABLE)}"
                " (upgrade the harness)",
            )
        try:
            data["steps"] = [Step(**s) for s in data["steps"]]
            return cls(**data)
        except (KeyError, TypeError) as malformed:
            raise UnreadableStory(f"{path} is not a story: {malformed}") from None

"""Shrinking a failing story by deleting its steps, replayed exactly.

Hypothesis finds a failing story (:func:`search`); this module makes it
short. Hypothesis' own shrinker works on its choice sequence, where the
first steps also carry its rule switches (swarm testing), so deleting an
early step reinterprets every later one. On a crash story that took about
900 replays and four minutes, ended at Hypothesis' five-minute limit on a
slower machine (so the result depended on the machine's speed), and still
left steps that a plain deletion removes. Here the story itself is shrunk:
steps are deleted, in halves, then quarters, down to single steps, and each
candidate is played back (:func:`~.playback.replay`) on a fresh world. A
candidate is kept when it fails the same way: the same property (or the
same unexpected exception type), broken at the same line (:func:`origin`).
What a kept candidate records is what it played, so a step that no longer
applied is not in it.

Deterministic: the order of tries is fixed and the budget counts replays,
never seconds, so the same found story shrinks to the same story anywhere.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from ..machine import machine_name
from .playback import StoryEndedEarly, replay
from .record import Counterexample, Step

#: How many candidate stories one shrink may play at most.
MAX_REPLAYS = 150


def _played(story: Counterexample) -> list[Step]:
    """The story's steps without its closing ``teardown``."""
    return [step for step in story.steps if step.rule != "teardown"]


def origin(failure: BaseException) -> tuple:
    """Where ``failure`` broke: its type and the line that raised it, then
    the same for what it was raised from or while handling. A violation
    wraps its check's ``Broken``, whose line tells one way a property
    breaks from another (a lock still held, a payload still queued), as
    Hypothesis' own "interesting origin" does. Two levels: below them is
    whatever was being handled when the story was played."""
    parts = []
    error: BaseException | None = failure
    while error is not None and len(parts) < 2:
        frame = error.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = None if frame is None else (frame.tb_frame.f_code.co_filename, frame.tb_lineno)
        parts.append((type(error).__name__, where))
        error = error.__cause__ or error.__context__
    return tuple(parts)


class Shrinker:
    """Deletes steps of one failing story while it keeps failing."""

    def __init__(self, failure: BaseException, budget: int = MAX_REPLAYS) -> None:
        self.found: Counterexample = failure.counterexample
        self.origin = origin(failure)
        self.best = failure
        self.replays = 0
        self.budget = budget

    @property
    def steps(self) -> list[Step]:
        """The shortest failing story so far, without its teardown."""
        return _played(self.best.counterexample)

    def attempt(self, steps: list[Step]) -> bool:
        """Play ``steps``; keep them if they fail the same way."""
        if self.replays >= self.budget:
            return False
        self.replays += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoryEndedEarly)
            failure = replay(replace(self.found, steps=steps))
        story = getattr(failure, "counterexample", None)
        if story is None or story.code != self.found.code or origin(failure) != self.origin:
            return False
        if len(_played(story)) >= len(self.steps):
            return False
        self.best = failure
        return True

    def delete_runs(self, size: int) -> bool:
        """Try deleting each run of ``size`` consecutive steps, front to
        back; whether any deletion was kept."""
        kept = False
        start = 0
        while start < len(self.steps) and self.replays < self.budget:
            steps = self.steps
            if self.attempt(steps[:start] + steps[start + size:]):
                kept = True  # the same start now names the next steps
            else:
                start += size
        return kept

    def run(self) -> BaseException:
        """Shrink; the failure of the shortest story found."""
        size = len(self.steps) // 2
        while size > 1:
            self.delete_runs(size)
            size //= 2
        while self.steps and self.delete_runs(1):
            pass
        return self.best


def shrink(failure: BaseException, budget: int = MAX_REPLAYS) -> BaseException:
    """The failure of the shortest story found from ``failure``'s (which
    must carry a :class:`Counterexample`), with a note saying how it was
    shrunk and, when it is shorter, notes naming its steps as Hypothesis
    names a program's (the found failure already carries its own)."""
    shrinker = Shrinker(failure, budget)
    shortest = shrinker.run()
    story = shortest.counterexample
    shortest.add_note(
        f"Shrunk by deleting steps: {len(_played(story))} of the "
        f"{len(_played(shrinker.found))} steps Hypothesis found, in {shrinker.replays} replays.",
    )
    if shortest is not failure:
        shortest.add_note(f"state = {machine_name(story.machine['enforcing'])}()")
        for step in story.steps:
            shortest.add_note(f"state.{step.call()}")
    return shortest


def shrink_each(failure: BaseException, budget: int = MAX_REPLAYS) -> BaseException:
    """``failure`` shrunk if it carries a story; a group (Hypothesis raises
    one when it replays failures of several origins from its example
    database) with each of its members so shrunk; anything else as it is."""
    if getattr(failure, "counterexample", None) is not None:
        return shrink(failure, budget)
    if isinstance(failure, BaseExceptionGroup):
        members = [shrink_each(member, budget) for member in failure.exceptions]
        if any(new is not old for new, old in zip(members, failure.exceptions)):
            return failure.derive(members)
    return failure


def search(machine: type, search_settings: settings) -> None:
    """Search ``machine`` with ``search_settings`` as the property suite
    does: Hypothesis stops at the first failing story (its own shrink phase
    off), and the failure of the shortest story :func:`shrink_each` finds
    is raised. Shrinking runs outside the handler of the found failure, so
    its replays raise afresh."""
    try:
        run_state_machine_as_test(machine, settings=settings(
            search_settings,
            phases=[phase for phase in search_settings.phases if phase is not Phase.shrink],
        ))
    except Exception as caught:  # pylint: disable=broad-except
        failure = caught
    else:
        return
    shortest = shrink_each(failure)
    if shortest is failure:
        raise failure
    raise shortest from None

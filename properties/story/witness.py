"""The counterexample a failing step leaves behind: built from the machine
that failed, as it was at that moment."""
from __future__ import annotations

import hypothesis

import reference_fix
from harness.kernel.controlled_bus import describe_payload
from harness.world import agentscope_under_test, patch_layer

from ..catalog import statement_of
from ..violation import InvariantViolated
from .environment import where_agentscope_came_from
from .record import Counterexample


def describe_failure(machine, failure: Exception) -> Counterexample:
    """``failure`` of ``machine``'s story, written down."""
    violated = isinstance(failure, InvariantViolated)
    code = failure.code if violated else "crash"
    world = machine.world
    return Counterexample(
        code=code,
        title=getattr(failure, "title", None) or f"a step raised {type(failure).__name__}",
        statement=statement_of(code) if violated else (
            "every step of the story runs without an unexpected exception"
        ),
        # Ids as the trace shows them: a raw id carries the story's
        # number in this process, which depends on what ran before.
        failure=world.alias(
            failure.args[0] if isinstance(failure, AssertionError) and failure.args
            else repr(failure),
        ),
        steps=list(machine.steps),
        machine=machine.configuration(),
        trace=world.render_trace(),
        events=_published_events(machine),
        agentscope_version=agentscope_under_test.version(),
        # Where it came from, never the finder's path (a folder is shared).
        agentscope_path=where_agentscope_came_from(agentscope_under_test.path()),
        reference_fix=reference_fix.is_applied(),
        error_type=type(failure).__name__,
        hypothesis_version=hypothesis.__version__,
        fixes=reference_fix.fixes_in_effect(),
        # A checkout's version string stays while its code changes.
        agentscope_source=agentscope_under_test.source_digest(),
        # The user's own patch layer, by name and digest ({}: none).
        patch=patch_layer.record(),
    )


def _published_events(machine) -> dict[str, list[str]]:
    """Each session's published event kinds, repeats folded."""
    published = {}
    for alias in machine.cast:
        if alias not in machine.world.sessions:
            continue
        kinds: list[str] = []
        counts: list[int] = []
        for event in machine.world.published(alias):
            kind = describe_payload(event)
            if kinds and kinds[-1] == kind:
                counts[-1] += 1
            else:
                kinds.append(kind)
                counts.append(1)
        published[alias] = [k if n == 1 else f"{k} ×{n}" for k, n in zip(kinds, counts)]
    return published

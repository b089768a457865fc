"""``test_repro.py``: a failing story as a standalone pytest file that
plays exactly those steps, without Hypothesis, and fails the same way."""
from __future__ import annotations

import textwrap

from ..catalog import BY_CODE
from .narration import narrate
from .record import Counterexample


def render_repro(self: Counterexample) -> str:
    """``test_repro.py``: the steps as plain calls, no Hypothesis."""
    machine = dict(self.machine)
    # A violation found on the way by another property's search is
    # enforced too, as replay enforces it, or the file would pass.
    if self.code in BY_CODE:
        machine["enforcing"] = sorted(set(machine.get("enforcing", [])) | {self.code})
    configuration = "".join(
        f"\n        {k}={v!r}," for k, v in sorted(machine.items())
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
    layer = (
        f"\n\nIt was found with the patch layer {self.patch.get('name')} "
        f"({self.patch.get('digest')}) installed:\n\n"
        f"    pytest test_repro.py --hitl-patch <path to {self.patch.get('name')}.py, or its module>"
        if self.patch else ""
    )
    return f'''"""{self.code} ({self.title}): a counterexample, replayed without Hypothesis.

Found by agentscope-hitl-harness against agentscope {self.agentscope_version}
(reference fix {"on" if self.reference_fix else "off"}). This test plays the shrunk story
step by step on a fresh world and checks {self.code} after each step: it fails while
agentscope has the bug and passes on a release or patch that fixes it.

    pytest test_repro.py                       # against the agentscope `import agentscope` finds
    pytest test_repro.py --hitl-reference-fix  # with the harness's reference fix applied{layer}

It writes nothing; with --hitl-counterexamples DIR a failure is also written to DIR
as a counterexample folder, and the output says where.
"""
from properties.story.playback import playing


def test_{self.code}_{self.short_id}():
    with playing({configuration}
    ) as story:
{steps}
'''

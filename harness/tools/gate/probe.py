"""Can the harness drive this agentscope? Run inside a gate environment.

``python -m harness.tools.gate.probe`` imports agentscope, then plays one short
story (a user message whose turn parks on a confirmation, then everything
settles) with no invariant enforced: any import, attribute or signature the
harness needs and this agentscope lacks shows up here, before a property
runs. It prints one JSON object: the agentscope it found, whether it can be
driven (and if not, the one line that says what was missed), how many
properties its suite has, and whether the reference fix applies to it. The
gate runs it as the first part of its pre-gate (:mod:`.pregate`).
"""
from __future__ import annotations

import json
import traceback
from pathlib import Path

#: The harness's own packages: the frame that met agentscope is in one.
_OURS = ("harness", "fakes", "properties", "reference_fix")


def _where(error: BaseException) -> str:
    """``package/.../module.py:line`` of the innermost harness frame."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        parts = Path(frame.filename).parts
        ours = [i for i, part in enumerate(parts[:-1]) if part in _OURS]
        if ours:
            return f"{'/'.join(parts[ours[-1]:])}:{frame.lineno}"
    return "?"


def _one_line(error: BaseException) -> str:
    message = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {message} (at {_where(error)})"


def probe() -> dict:
    """What the gate needs to know before running any property."""
    found: dict = {"version": None, "path": None, "drivable": False, "missed": None,
                   "fix_refusal": None}
    try:
        from harness.world import agentscope_under_test  # pylint: disable=import-outside-toplevel

        found["version"] = agentscope_under_test.version()
        found["path"] = agentscope_under_test.path()
    except Exception as error:  # pylint: disable=broad-except
        found["missed"] = f"cannot import agentscope: {_one_line(error)}"
        return found
    try:
        from harness.world.quiet import silence_agentscope  # pylint: disable=import-outside-toplevel
        from properties.machine import machine_enforcing  # pylint: disable=import-outside-toplevel

        silence_agentscope()
        machine = machine_enforcing()()
        try:
            machine.user_sends_message(session="leader", model_turn="calls GatedAction")
            machine.everything_settles()
        finally:
            machine.world.close()
        found["drivable"] = True
        from properties.catalog import PROPERTIES  # pylint: disable=import-outside-toplevel

        found["properties"] = len(PROPERTIES)
    except Exception as error:  # pylint: disable=broad-except
        found["missed"] = _one_line(error)
    try:
        import reference_fix  # pylint: disable=import-outside-toplevel

        found["fix_refusal"] = reference_fix.refusal()
        from properties.catalog import code_order  # pylint: disable=import-outside-toplevel

        planned = reference_fix.plan()  # each fix whole, or refused
        found["fix_applies"] = planned.fixes
        found["fix_refused"] = [str(refused) for refused in planned.refused]
        found["fix_covers"] = sorted({code for p in planned for code in p.covers}, key=code_order)
    except Exception as error:  # pylint: disable=broad-except
        found["fix_refusal"] = _one_line(error)
    return found


if __name__ == "__main__":
    print(json.dumps(probe()))

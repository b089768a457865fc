"""The pre-gate inside a release's environment (:mod:`.pregate` is the
gate's side)::

    python -m harness.tools.gate.pregate_inside [--with-fix] [--patch MODULE] FOLDER...

prints one JSON line with the probe's answer (:mod:`.probe`), then, if the
harness can drive this agentscope, one per folder replayed
(:func:`harness.tools.replay.replay_story`). With ``--with-fix`` the
reference fixes are applied first where they target this release, as for
the suite; with ``--patch`` the user's patch layer is installed next (the
probe's answer then names it, or says why it cannot be installed here, and
nothing is replayed).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .pregate import CANNOT


def _replay_one(folder: Path) -> dict:
    """One folder's replay as the gate reads it."""
    from properties.story.record import Counterexample, UnreadableStory  # pylint: disable=import-outside-toplevel

    from ..replay import replay_story  # pylint: disable=import-outside-toplevel

    entry = {"folder": folder.name, "path": str(folder), "found_on": None, "code": None}
    try:
        recorded = Counterexample.load(folder)
    except UnreadableStory as unreadable:
        return {**entry, "status": CANNOT, "why": f"unreadable: {unreadable}"}
    entry.update(found_on=recorded.agentscope_version, code=recorded.code)
    try:
        replayed = replay_story(recorded)
    except Exception as error:  # pylint: disable=broad-except
        return {**entry, "status": CANNOT, "why": f"the replay broke: {type(error).__name__}: {error}"}
    return {**entry, "status": replayed.status, "why": " ".join(replayed.why.split())}


def main(argv: list[str] | None = None) -> None:
    """The probe, then each folder replayed: one JSON line each."""
    parser = argparse.ArgumentParser(prog="python -m harness.tools.gate.pregate_inside")
    parser.add_argument("--with-fix", action="store_true")
    parser.add_argument("--patch", default=None)
    parser.add_argument("folders", nargs="*", type=Path)
    arguments = parser.parse_args(argv)
    from .probe import probe  # pylint: disable=import-outside-toplevel

    found = probe()
    if not found.get("drivable"):
        print(json.dumps({"probe": found}), flush=True)
        return
    if arguments.with_fix and not found.get("fix_refusal"):
        import reference_fix  # pylint: disable=import-outside-toplevel

        reference_fix.apply()
    if arguments.patch:
        from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

        try:
            found["patch"] = patch_layer.install(arguments.patch).describe()
        except patch_layer.PatchRefused as refused:
            found["patch_refusal"] = f"--patch {arguments.patch}: {refused}"
    print(json.dumps({"probe": found}), flush=True)
    if found.get("patch_refusal"):
        return
    for folder in arguments.folders:
        print(json.dumps({"replayed": _replay_one(folder)}), flush=True)


if __name__ == "__main__":
    main()

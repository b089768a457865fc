"""``hitl-harness``: the gate and the replay of counterexamples.

    hitl-harness gate [SPEC ...] [--with-fix] [--profile NAME] [--json FILE] [--junit FILE]
    hitl-harness replay PATH [--with-fix]

Exit codes are :class:`harness.tools.gate.Exit` (see the README).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hitl-harness",
        description="Property-based tests of agentscope's human-in-the-loop runs.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gate = commands.add_parser(
        "gate",
        help="run the property suite against agentscope releases, wheels or checkouts",
        description="Run the property suite against each SPEC in its own cached "
        "environment and print SPEC x property verdicts. With no SPEC: the "
        "release the project pins and the newest release.",
    )
    gate.add_argument(
        "specs", nargs="*", metavar="SPEC",
        help="a release (2.0.11), a version range ('>=2.0.9,<2.0.11'), 'latest', "
        "a wheel file, or an agentscope source checkout (a folder)",
    )
    gate.add_argument("--with-fix", action="store_true",
                      help="apply the reference fix where it targets the release")
    gate.add_argument("--profile", default="ci", choices=("dev", "ci", "thorough"),
                      help="Hypothesis profile (default: ci, derandomized)")
    gate.add_argument("--json", type=Path, metavar="FILE", help="write the verdicts as JSON")
    gate.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML")
    gate.add_argument("--counterexamples", type=Path, metavar="DIR",
                      default=Path(os.environ.get("HITL_COUNTEREXAMPLES", "counterexamples")),
                      help="where counterexample folders go (default: ./counterexamples)")
    gate.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                      help="pytest-xdist workers per SPEC (default: 2)")
    replay = commands.add_parser(
        "replay",
        help="re-run a counterexample folder and say whether it still fails",
        description="Replay a counterexample folder's story against the agentscope "
        "`import agentscope` finds. Exit 1 if it still fails, 0 if it passes now.",
    )
    replay.add_argument("path", type=Path, metavar="PATH", help="a counterexample folder")
    replay.add_argument("--with-fix", action="store_true", help="apply the reference fix first")
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "gate":
        from .gate import gate  # pylint: disable=import-outside-toplevel

        return int(gate(
            arguments.specs,
            with_fix=arguments.with_fix,
            profile=arguments.profile,
            counterexamples=arguments.counterexamples,
            workers=arguments.workers,
            json_path=arguments.json,
            junit_path=arguments.junit,
        ))
    from .replay import replay_folder  # pylint: disable=import-outside-toplevel

    return replay_folder(arguments.path, with_fix=arguments.with_fix)


if __name__ == "__main__":
    sys.exit(main())

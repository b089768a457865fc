"""``hitl-harness``: the gate and the replay of counterexamples.

    hitl-harness gate [SPEC ...] [--baseline SPEC | --baseline-json FILE] [--known FILE]
                      [--with-fix] [--profile NAME] [--json FILE] [--junit FILE]
    hitl-harness replay PATH [--with-fix]
    hitl-harness expect [FILE] [--known FILE] [--verdicts FILE] [--write]

Exit codes are :class:`harness.tools.gate.Exit` (see the README).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


#: Most pytest-xdist workers a gate may ask for per SPEC.
MAX_WORKERS = 64


def _workers(text: str) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_WORKERS}")
    return value


def _version() -> str:
    from importlib import metadata  # pylint: disable=import-outside-toplevel

    try:
        return metadata.version("agentscope-hitl-harness")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hitl-harness",
        description="Property-based tests of agentscope's human-in-the-loop runs.",
    )
    parser.add_argument("--version", action="version", version=f"hitl-harness {_version()}")
    commands = parser.add_subparsers(dest="command")
    gate = commands.add_parser(
        "gate",
        help="run the property suite against agentscope releases, wheels or checkouts",
        description="Run the property suite against each SPEC in its own cached "
        "environment and print SPEC x property verdicts. With no SPEC: the "
        "release the project pins and the newest release. With --baseline or "
        "--known, only a new violation that is not known fails (exit 1). Every "
        "SPEC and path is checked before any work: a mistake ends the gate at once "
        "(exit 2; 3 for a SPEC that names no agentscope).",
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
    gate.add_argument("--baseline", metavar="SPEC",
                      help="also gate SPEC (one release, wheel or checkout) and classify each "
                      "candidate's properties against it: new, fixed, still violated or holds; "
                      "only a new violation fails the gate")
    gate.add_argument("--baseline-json", type=Path, metavar="FILE",
                      help="take the baseline's verdicts from a gate's saved --json instead of "
                      "running it (with --baseline SPEC: that SPEC's verdicts in FILE)")
    gate.add_argument("--known", type=Path, metavar="FILE",
                      help="a list of known violations (property, releases, finding): shown, "
                      "but they do not fail the gate; the project's own is "
                      "docs/findings/known.json")
    gate.add_argument("--workers", type=_workers, default=min(2, os.cpu_count() or 1),
                      help=f"pytest-xdist workers per SPEC, 1 to {MAX_WORKERS} (default: 2)")
    replay = commands.add_parser(
        "replay",
        help="re-run a counterexample folder and say whether it still fails",
        description="Replay a counterexample folder's story against the agentscope "
        "`import agentscope` finds. Exit 1 if it still fails, 0 if it passes now.",
    )
    replay.add_argument("path", type=Path, metavar="PATH", help="a counterexample folder")
    replay.add_argument("--with-fix", action="store_true", help="apply the reference fix first")
    expect = commands.add_parser(
        "expect",
        help="run the property suite (ci profile) and hold it to its expected verdicts",
        description="Run the property suite with the ci profile on the agentscope installed "
        "here and print one line per property against the expected verdicts: exit 1 when a "
        "verdict, a violation found on the way or a reached window changed, or a violation "
        "is no known finding.",
    )
    expect.add_argument("expected", nargs="?", type=Path, metavar="FILE",
                        help="the expected verdicts (default: docs/findings/expected-<release>.json)")
    expect.add_argument("--known", type=Path, metavar="FILE",
                        help="the known violations (default: docs/findings/known.json)")
    expect.add_argument("--verdicts", type=Path, metavar="FILE",
                        help="compare a run's --verdicts-json instead of running the suite")
    expect.add_argument("--write", action="store_true",
                        help="record the run as the expected verdicts (after an intended change)")
    expect.add_argument("--workers", type=_workers, default=min(2, os.cpu_count() or 1),
                        help="pytest-xdist workers (default: 2)")
    expect.add_argument("--log", type=Path, default=Path("property-suite.log"), metavar="FILE",
                        help="where pytest's output goes (default: ./property-suite.log)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command is None:
        parser.print_help()
        return 2
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
            baseline=arguments.baseline,
            baseline_json=arguments.baseline_json,
            known=arguments.known,
        ))
    if arguments.command == "expect":
        from .expected import expect  # pylint: disable=import-outside-toplevel

        return expect(arguments.expected, known_path=arguments.known,
                      verdicts_json=arguments.verdicts, write=arguments.write,
                      workers=arguments.workers, log=arguments.log)
    from .replay import replay_folder  # pylint: disable=import-outside-toplevel

    return replay_folder(arguments.path, with_fix=arguments.with_fix)


if __name__ == "__main__":
    sys.exit(main())

"""``hitl-harness``: the gate, the merge of saved gates, and the replay of
counterexamples.

    hitl-harness gate [SPEC ...] [--baseline SPEC | --baseline-json FILE] [--known FILE]
                      [--with-fix] [--profile NAME] [--json FILE] [--junit FILE]
                      [--shard I/N] [--budget MINUTES] [--corpus DIR] [--patch MODULE]
    hitl-harness merge FILE ... [--json FILE] [--junit FILE]
    hitl-harness replay PATH [--with-fix] [--patch MODULE]
    hitl-harness expect [FILE] [--known FILE] [--verdicts FILE] [--write] [--patch MODULE]

A bare ``hitl-harness`` prints the help and exits 2 (a usage error). Exit
codes are :class:`harness.tools.gate.Exit` (see the README); each command's
help lists them, the environment variables it reads and the cache.
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


def _shard(text: str):
    """``--shard``: ``i/n``, checked before any work."""
    from .gate.shards import BadShard, parse  # pylint: disable=import-outside-toplevel

    try:
        return parse(text)
    except BadShard as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None


#: The gate's exit codes, as its help lists them (:class:`harness.tools.gate.Exit`).
GATE_EXITS = """\
exit codes:
  0  nothing new is violated (every property holds, or each violation is known
     or was on the baseline)
  1  a property is newly VIOLATED (a counterexample folder was written)
  2  the command line was wrong: an option, a SPEC, a shard, a path, a file
     (before any work)
  3  a SPEC names no agentscope (before any work)
  4  an environment could not be built
  5  the harness cannot drive that agentscope (the row names what it missed)
  6  a property run broke without verdicts (the row names its log)
  7  a property suite did not finish within its --budget (it was ended, its
     workers too)
  8  a property's search broke with no story (ERROR: a health check, the
     shrinker, a teardown or the harness itself); nothing was learnt
  130  interrupted (Ctrl-C): one line; --json and --junit are still written,
     each SPEC that did not finish marked "interrupted"
  When SPECs end differently, the lowest non-zero code wins."""


#: The merge's exit codes: the gate's, from the saved verdicts.
MERGE_EXITS = """\
exit codes (those the gates would have ended with together):
  0  nothing new is violated      1  a property is newly VIOLATED
  2  the command line was wrong, or the files cannot form one gate: not a
     gate's JSON, a SPEC in two files, different settings, a missing shard
  3-6  a SPEC could not run (see `hitl-harness gate --help`)
  7  a SPEC's property suite did not finish within its --budget
  8  a property's search broke with no story (ERROR)
  130  interrupted (Ctrl-C)"""


#: ``hitl-harness`` itself: the codes every command shares.
TOP_EXITS = """\
Without a command, this help, and exit 2. `hitl-harness COMMAND --help` lists
each command's exit codes, environment variables and cache.

exit codes (every command):
  0  the command's good outcome (nothing new violated, passes now, as expected)
  1  a property is violated, still fails, or a verdict changed
  2  the command line was wrong (a one-line error on stderr, before any work)
  3-8  what each command's --help lists
  130  interrupted (Ctrl-C): one line on stderr"""

#: ``replay``'s exit codes (:mod:`harness.tools.replay`).
REPLAY_EXITS = """\
exit codes:
  0  passes now
  1  still fails (the same way, differently, or a step no longer applies)
  2  not a counterexample folder (checked before agentscope is imported), or
     --with-fix or --patch refused
  3  the story cannot be played by this harness (a rule or an argument it does
     not know): it neither fails nor passes
  130  interrupted (Ctrl-C)"""


def _gate_epilog() -> str:
    return GATE_EXITS + """

environment variables:
  HITL_GATE_CACHE       the cache (below)
  HITL_COUNTEREXAMPLES  where counterexample folders go (default: ./counterexamples)
  UV_DEFAULT_INDEX, UV_INDEX_URL, PIP_INDEX_URL, UV_INDEX, UV_EXTRA_INDEX_URL,
  PIP_EXTRA_INDEX_URL, UV_INDEX_STRATEGY (and uv.toml): the package index the
                        releases are listed from and installed from, as uv reads them

cache: $HITL_GATE_CACHE, else $XDG_CACHE_HOME/agentscope-hitl-harness, else
  ~/.cache/agentscope-hitl-harness. Its envs/ holds one environment per SPEC,
  built once with uv (delete one to rebuild it), each with the last run's
  pytest output in last-run.log; timings.json keeps how long each release's
  pre-gate and suite took (the progress display's ETA).

reference fixes (--with-fix):
""" + _fixes()


def _fixes() -> str:
    """Each reference fix in one line: its name, releases and properties."""
    import reference_fix  # pylint: disable=import-outside-toplevel

    return reference_fix.summary(indent="  ")


def _minutes(text: str) -> float:
    """``--budget``: a number of minutes above 0 (a week at most)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes") from None
    if not 0 < value <= 7 * 24 * 60:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and a week of minutes")
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
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TOP_EXITS,
    )
    parser.add_argument("--version", action="version", version=f"hitl-harness {_version()}")
    commands = parser.add_subparsers(dest="command")
    gate = commands.add_parser(
        "gate",
        help="run the property suite against agentscope releases, wheels or checkouts",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_gate_epilog(),
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
                      help="apply each reference fix that targets the release (the fixes "
                      "and the releases they reach are listed below)")
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
    gate.add_argument("--budget", type=_minutes, metavar="MINUTES",
                      help="the most each release's property suite may take: one still "
                      "running then is ended (its whole process group) and gets the verdict "
                      "'did not finish', exit 7 (default: no budget)")
    gate.add_argument("--corpus", type=Path, metavar="DIR",
                      help="the counterexample folders the pre-gate replays on each release "
                      "before any search, each reported as still fails, passes now or cannot "
                      "replay (default: the project's docs/findings/counterexamples)")
    gate.add_argument("--workers", type=_workers, default=min(2, os.cpu_count() or 1),
                      help=f"pytest-xdist workers per SPEC, 1 to {MAX_WORKERS} (default: 2)")
    _deployment_options(gate)
    _patch_option(gate)
    gate.add_argument("--shard", type=_shard, metavar="I/N",
                      help="run only shard I of N of the releases the SPECs name (every N-th, "
                      "from the I-th), for N CI runners; the baseline runs in every shard. "
                      "Combine the shards' --json with `hitl-harness merge`")
    merge = commands.add_parser(
        "merge",
        help="combine saved gate verdicts (--json files, e.g. of shards) into one table",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the verdicts several gates saved with --json (the shards of "
        "one gate,\n`gate --shard I/N`) as one table, and exit with the code that gate "
        "would have\nended with. A baseline several files hold is shown once.",
        epilog=MERGE_EXITS,
    )
    merge.add_argument("files", type=Path, nargs="+", metavar="FILE",
                       help="a gate's --json")
    merge.add_argument("--json", type=Path, metavar="FILE", help="write the merged verdicts as JSON")
    merge.add_argument("--junit", type=Path, metavar="FILE", help="write the merged JUnit XML")
    replay = commands.add_parser(
        "replay",
        help="re-run a counterexample folder and say whether it still fails",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Replay a counterexample folder's story against the agentscope "
        "`import agentscope`\nfinds (run it in that agentscope's environment).",
        epilog=REPLAY_EXITS + "\n\nreference fixes (--with-fix):\n" + _fixes(),
    )
    replay.add_argument("path", type=Path, metavar="PATH", help="a counterexample folder")
    replay.add_argument("--with-fix", action="store_true",
                        help="apply each reference fix that targets the installed agentscope "
                        "first (listed below)")
    _patch_option(replay, "; a story recorded with a layer replays as it was found only "
                  "with the same one (said in one line when it differs)")
    expect = commands.add_parser(
        "expect",
        help="run the property suite (ci profile) and hold it to its expected verdicts",
        description="Run the property suite with the ci profile on the agentscope installed "
        "here and print one line per property against the expected verdicts.",
        epilog="exit codes:\n"
        "  0  every property as expected\n"
        "  1  a verdict or a reached window changed, a violation recorded on the way is no\n"
        "     longer met, or a violation is no known finding\n"
        "  2  an input cannot be read, or the run broke\n"
        "  3  a property's search broke with no story (ERROR): nothing was learnt\n"
        "  130  interrupted (Ctrl-C)\n"
        "A file recorded with another Hypothesis than the one installed is said in one line.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    expect.add_argument("expected", nargs="?", type=Path, metavar="FILE",
                        help="the expected verdicts (default: docs/findings/expected-<release>.json)")
    expect.add_argument("--known", type=Path, metavar="FILE",
                        help="the known violations (default: docs/findings/known.json)")
    expect.add_argument("--verdicts", type=Path, metavar="FILE",
                        help="compare a run's pytest --hitl-verdicts-json instead of running the suite (a run "
                        "searched on another --bus/--nodes than FILE names is an error)")
    expect.add_argument("--write", action="store_true",
                        help="record the run as the expected verdicts (after an intended change); "
                        "an existing FILE keeps its properties and its --bus/--nodes (a --verdicts run "
                        "is recorded with its own)")
    expect.add_argument("--workers", type=_workers, default=min(2, os.cpu_count() or 1),
                        help="pytest-xdist workers (default: 2)")
    expect.add_argument("--log", type=Path, default=Path("property-suite.log"), metavar="FILE",
                        help="where pytest's output goes (default: ./property-suite.log)")
    _deployment_options(expect)
    _patch_option(expect)
    expect.add_argument("--properties", type=lambda text: tuple(text.split(",")), default=(),
                        metavar="I1,I2,...",
                        help="only these properties (with --write; a file that names its "
                        "properties, and its --bus/--nodes, runs with them)")
    return parser


def _patch_option(parser: argparse.ArgumentParser, more: str = "") -> None:
    from .patch_option import HELP  # pylint: disable=import-outside-toplevel

    parser.add_argument("--patch", metavar="MODULE", default=None, help=HELP + more)


def _deployment_options(parser: argparse.ArgumentParser) -> None:
    """``--bus`` and ``--nodes``, handed on to the property suite."""
    parser.add_argument("--bus", choices=("fake", "redis"), default=None,
                        help="the bus the stories run on: the fake (default) or agentscope's "
                        "RedisMessageBus on a real redis-server the suite starts")
    parser.add_argument("--nodes", type=int, default=None, metavar="N",
                        help="processes of agentscope sharing the Redis server (default 2 "
                        "with --bus redis)")


def _deployment(arguments: argparse.Namespace) -> tuple[str, ...]:
    """The suite's options for the deployment asked for (none: the fake)."""
    options: tuple[str, ...] = ()
    if arguments.bus:
        options += ("--hitl-bus", arguments.bus)
    if arguments.nodes is not None:
        options += ("--hitl-nodes", str(arguments.nodes))
    return options


def main(argv: list[str] | None = None) -> int:
    """Run the command; Ctrl-C anywhere is one line and exit 130."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("hitl-harness: interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED


#: The exit code of a command ended by Ctrl-C (128 + SIGINT), as a shell's.
INTERRUPTED = 130


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command is None:
        parser.print_help()
        return 2
    if arguments.command == "replay" and not (arguments.path / "story.json").is_file():
        # the path first, before anything is imported
        print(f"hitl-harness replay: error: {arguments.path} is not a counterexample folder: "
              f"no story.json {'in it' if arguments.path.is_dir() else 'there'}", file=sys.stderr)
        return 2
    from . import patch_option  # pylint: disable=import-outside-toplevel

    try:
        patch = patch_option.checked(getattr(arguments, "patch", None),
                                     importing=arguments.command != "gate")
    except patch_option.Refused as refused:
        print(f"hitl-harness {arguments.command}: error: {refused}", file=sys.stderr)
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
            shard=arguments.shard,
            budget=arguments.budget,
            corpus=arguments.corpus,
            deployment=_deployment(arguments),
            patch=patch,
        ))
    if arguments.command == "merge":
        from .gate.merge import merge  # pylint: disable=import-outside-toplevel

        return int(merge(arguments.files, json_path=arguments.json, junit_path=arguments.junit))
    if arguments.command == "expect":
        from .expected import expect  # pylint: disable=import-outside-toplevel

        return expect(arguments.expected, known_path=arguments.known,
                      verdicts_json=arguments.verdicts, write=arguments.write,
                      workers=arguments.workers, log=arguments.log,
                      deployment=_deployment(arguments), properties=arguments.properties,
                      patch=patch)
    from .replay import replay_folder  # pylint: disable=import-outside-toplevel

    return replay_folder(arguments.path, with_fix=arguments.with_fix, patch=patch)


if __name__ == "__main__":
    sys.exit(main())

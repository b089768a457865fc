"""Flakiness, measured: ``hitl-harness expect`` run N times, each in a fresh
process and a fresh folder, and every difference between the runs.

    python scripts/rerun_expect.py docs/findings/expected-2.0.8.json --runs 10
    python scripts/rerun_expect.py docs/findings/expected-2.0.8-redis-2-nodes.json --runs 5
    python scripts/rerun_expect.py FILE --runs 5 --python /path/to/venv/bin/python

Each run plays the file's properties, on the file's deployment, as
``expect`` does (``ci`` profile), with ``--write`` on a copy of the file in
its own folder: what the run said is that copy, the JSON ``expect --write``
records (each property's verdict, the violations met on the way, the
windows reached), and the counterexample folders it wrote there
(``counterexamples/<code>-<id>``, each file's bytes). Runs are compared
with the first; each difference is one line. The last line is the summary,
``N runs, D differences``, and a line says whether the first run agrees
with FILE itself. Exit 0 with no difference between runs, 1 with one, 2
when a run broke.

``--python`` runs another interpreter (another agentscope release's
virtual environment) on this checkout's code. Run it with ``nice -n 10``:
it keeps the machine busy for minutes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What a run said about one property, as ``expect --write`` records it.
FIELDS = ("verdict", "also_found", "reached")


def one_run(python: str, expected: Path, folder: Path, workers: int) -> tuple[dict, dict[str, str], float]:
    """``expect --write`` on a copy of ``expected`` in ``folder``, in a
    fresh process: the verdicts it recorded, the digest of each file of
    each counterexample folder, and the wall seconds it took."""
    folder.mkdir(parents=True)
    copy = folder / "expected.json"
    shutil.copyfile(expected, copy)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(
        [python, "-m", "harness", "expect", str(copy), "--write",
         "--workers", str(workers), "--log", str(folder / "property-suite.log")],
        cwd=folder, env=env, capture_output=True, text=True, check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"expect exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
    recorded = json.loads(copy.read_text(encoding="utf-8"))["verdicts"]
    written = folder / "counterexamples"
    files = {
        str(path.relative_to(written)): hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for path in sorted(written.rglob("*")) if path.is_file()
    } if written.is_dir() else {}
    return recorded, files, seconds


def differences(first: tuple[dict, dict[str, str]], other: tuple[dict, dict[str, str]]) -> list[str]:
    """One line per thing ``other`` says differently from ``first``."""
    found = []
    for code in sorted(set(first[0]) | set(other[0])):
        one, two = first[0].get(code), other[0].get(code)
        if one is None or two is None:
            found.append(f"{code}: {'no verdict' if two is None else 'a verdict'} (first run: {one and one['verdict']})")
            continue
        for field in FIELDS:
            if one.get(field) != two.get(field):
                found.append(f"{code} {field}: {two.get(field)} (first run: {one.get(field)})")
    folders = lambda files: sorted({name.split("/")[0] for name in files})  # noqa: E731
    if folders(first[1]) != folders(other[1]):
        found.append(f"folders: {folders(other[1])} (first run: {folders(first[1])})")
    else:
        found += [f"{name} differs" for name in sorted(first[1]) if first[1][name] != other[1].get(name)]
    return found


def agrees_with_file(recorded: dict, expected: Path) -> list[str]:
    """Where the first run differs from the file it was asked to hold to."""
    said = json.loads(expected.read_text(encoding="utf-8"))["verdicts"]
    return [f"{code} {field}" for code in sorted(set(said) | set(recorded)) for field in FIELDS
            if (said.get(code) or {}).get(field) != (recorded.get(code) or {}).get(field)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("expected", type=Path, help="an expected-verdicts file (docs/findings/expected-*.json)")
    parser.add_argument("--runs", type=int, default=10, help="how many runs (default 10)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter to run expect with (default: this one)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per run (default 2)")
    arguments = parser.parse_args()
    expected = arguments.expected.resolve()
    runs = []
    with tempfile.TemporaryDirectory(prefix="rerun-expect-") as scratch:
        for n in range(1, arguments.runs + 1):
            try:
                recorded, files, seconds = one_run(arguments.python, expected, Path(scratch) / f"run{n}",
                                                   arguments.workers)
            except RuntimeError as broke:
                print(f"run {n}: broke: {broke}")
                return 2
            runs.append((recorded, files))
            violated = sorted(code for code, said in recorded.items() if said["verdict"] == "VIOLATED")
            print(f"run {n}: {len(recorded)} properties, VIOLATED {','.join(violated) or 'none'}, "
                  f"{len({name.split('/')[0] for name in files})} folders, {seconds:.0f} s", flush=True)
    found = 0
    for n, run in enumerate(runs[1:], start=2):
        for line in differences(runs[0], run):
            print(f"run {n}: {line}")
            found += 1
    off = agrees_with_file(runs[0][0], expected)
    print(f"the first run {'agrees with' if not off else 'differs from'} {arguments.expected}"
          + (f" ({', '.join(off)})" if off else ""))
    print(f"{len(runs)} runs, {found} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

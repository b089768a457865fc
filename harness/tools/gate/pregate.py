"""The pre-gate: the committed counterexamples, replayed before any search.

Like FoundationDB's restarting tests, which run the old corpus against a new
binary, each release's environment first replays every counterexample
folder of the corpus (``docs/findings/counterexamples`` by default,
``--corpus DIR``) and says of each: *still fails*, *passes now*, or *cannot
replay* and why in one line (a folder recorded on another release may name
a rule or a turn this harness does not have). It takes seconds, and it is
news before the minutes of searching: a finding a release fixed shows up at
once. It does not change the exit code; the searches give the verdicts.

The same process first runs the probe (:mod:`.probe`): one import of
agentscope serves both. It is :mod:`.pregate_inside`, run inside the
environment; this module is the gate's side.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from . import processes
from .environments import Environment
from .table import WIDTH, spec_cell, wrap

#: What a folder's replay found (:func:`harness.tools.replay.replay_story`).
STILL, NOW_PASSES, CANNOT = "still fails", "passes now", "cannot replay"
STATUSES = (STILL, NOW_PASSES, CANNOT)

#: Seconds the probe and the pre-gate together may take in one environment.
LIMIT = 5 * 60


def default_corpus() -> Path:
    """The project's committed counterexamples (in a checkout of the
    harness; an installed harness has none, and the pre-gate then has
    nothing to replay unless ``--corpus`` names a folder)."""
    return Path(__file__).resolve().parents[3] / "docs" / "findings" / "counterexamples"


def folders(corpus: Path) -> list[Path]:
    """The counterexample folders of ``corpus`` (those holding a story)."""
    if not corpus.is_dir():
        return []
    return sorted(p for p in corpus.iterdir() if (p / "story.json").is_file())


def check_corpus(corpus: Path | None) -> str | None:
    """Why ``--corpus`` cannot be used (``None`` when it can)."""
    if corpus is None:
        return None
    if not corpus.is_dir():
        return f"--corpus {corpus}: no such folder"
    if not folders(corpus):
        return f"--corpus {corpus}: holds no counterexample folder (none has a story.json)"
    return None


# ── in the gate ───────────────────────────────────────────────────────


async def run(env: Environment, corpus: list[Path], *, with_fix: bool,
              environ: dict[str, str], on_replayed=None,
              patch: str | None = None) -> tuple[dict, list[dict]]:
    """The probe's answer and each folder's replay, in ``env`` (with the
    user's ``patch`` layer installed, if any: the probe then says its name
    and digest, or why it cannot be installed there); a folder the process
    did not get to (it broke, or ran out of :data:`LIMIT`) cannot be
    replayed, and says why."""
    found: dict = {}
    replayed: list[dict] = []

    def heard(line: str) -> None:
        try:
            said = json.loads(line)
        except ValueError:
            return  # a warning or a log line: not ours
        if not isinstance(said, dict):
            return
        if "probe" in said:
            found.update(said["probe"])
        elif "replayed" in said:
            replayed.append(said["replayed"])
            if on_replayed is not None:
                on_replayed(said["replayed"])

    command = [str(env.python), "-m", "harness.tools.gate.pregate_inside",
               *(["--with-fix"] if with_fix else []),
               *(["--patch", patch] if patch else []), *map(str, corpus)]
    why = None
    try:
        done = await processes.stream(command, env=environ, on_line=heard, limit=LIMIT)
        if done.returncode != 0:
            why = f"the pre-gate broke (exit {done.returncode}): {done.last_line()}"
    except processes.TimedOut:
        why = f"the pre-gate did not finish within {LIMIT // 60} min"
    if not found:
        found = {"drivable": False, "missed": f"the probe crashed: {why or 'no answer'}"}
    if not found.get("drivable"):
        why = f"the harness cannot drive this agentscope: {found.get('missed')}"
    elif found.get("patch_refusal"):
        why = found["patch_refusal"]
    elif why is None:
        why = "the pre-gate ended before it"
    seen = {entry["folder"] for entry in replayed}
    replayed += [
        {"folder": f.name, "path": str(f), "found_on": None, "code": None,
         "status": CANNOT, "why": why}
        for f in corpus if f.name not in seen
    ]
    return found, replayed


def summary(entries: list[dict]) -> str:
    """``31 replayed: 29 still fail, 1 passes now, 1 cannot replay``."""
    counts = {status: sum(e["status"] == status for e in entries) for status in STATUSES}
    words = {STILL: ("still fails", "still fail"), NOW_PASSES: ("passes now", "pass now"),
             CANNOT: ("cannot replay", "cannot replay")}
    said = [f"{n} {words[s][n != 1]}" for s, n in counts.items() if n]
    return f"{len(entries)} replayed: {', '.join(said) or 'nothing'}"


def details(entries: list[dict]) -> list[str]:
    """One release's folders by what their replay found: those that still
    fail on one (wrapped) line, each other with its one-line why."""
    lines = []
    still = [e for e in entries if e["status"] == STILL]
    if still:
        named = ", ".join(
            e["folder"] + ("" if e["why"].startswith("the same way") else " (differently)")
            for e in still
        )
        lines += textwrap.wrap(f"{STILL}: {named}", WIDTH - 2, subsequent_indent="  ")
    for entry in entries:
        if entry["status"] != STILL:
            found = f" (found on {entry['found_on']})" if entry["found_on"] else ""
            lines += textwrap.wrap(f"{entry['status']}: {entry['folder']}{found}: {entry['why']}",
                                   WIDTH - 2, subsequent_indent="  ")
    return lines


def render(rows, corpus: Path | str | None) -> str:
    """The pre-gate of every row that has one: a summary line per release,
    then its :func:`details` (``corpus``: where the folders came from, if
    known; saved verdicts a merge reads may not say)."""
    lines = []
    for row in rows:
        if row.pregate:
            lines.append(f"{spec_cell(row)}: {summary(row.pregate)}")
            lines += [f"  {line}" for line in details(row.pregate)]
    if not lines:
        return ""
    source = f"the counterexamples of {corpus}" if corpus else "the committed counterexamples"
    return "\n".join([wrap(f"pre-gate: {source} replayed before any search"), *lines])


"""The property suite against its expected verdicts: what CI checks.

The ``ci`` profile is derandomized, so on one agentscope release the suite
says the same thing every time: each property's verdict, what its search
found on the way, and which of its windows its stories reached. A file
such as ``docs/findings/expected-2.0.8.json`` holds that, per property::

    {"agentscope": "2.0.8", "profile": "ci",
     "verdicts": {"I1": {"verdict": "VIOLATED", "also_found": ["I2"],
                         "reached": ["payload-in-parked-tail", ...]}, ...}}

:func:`compare` holds a run to it. A property's line turns red when

- its verdict differs (a violation no longer found: an invariant cut off
  from the suite; a new one: a regression, or a search that changed), or
  is ERROR (the search broke with no story: exit 3, never a violation);
- a violation the file says its search met on the way is no longer met
  (one met anew is said, and must be known);
- a window the file says its stories reached is no longer reached (a rule
  stopped reaching it);
- a violation, expected or not, is no known finding: every one must have
  an entry in the known-violations list the gate reads
  (``docs/findings/known.json``, :mod:`.gate.known`);
- the suite gave it no verdict, or the file has none for it.

``hitl-harness expect`` runs the suite and prints one line per property
(``--write`` records a run as the new expectation, after an intended
change).
"""
from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio

from harness.world.deployment import Deployment, DeploymentRefused

from . import toolchain
from .gate import known as known_list
from .pytest_plugin import NOT_APPLICABLE
from .verdicts import ERROR

#: How expectation lines start, for a program reading the output.
EXPECT_LINE = "hitl-expect"

#: The project's own files, beside the findings.
FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"


def default_path(version: str) -> Path:
    """The project's expected verdicts for agentscope ``version``."""
    return FINDINGS / f"expected-{version}.json"


class BadExpectation(Exception):
    """The expected verdicts cannot be read (one line)."""


@dataclass
class Line:
    """One property's verdict against its expectation."""

    code: str
    said: str  # the verdict as the run gave it, with findings and windows
    changes: list[str]

    @property
    def ok(self) -> bool:
        return not self.changes

    def render(self) -> str:
        status = "as expected" if self.ok else "CHANGED: " + "; ".join(self.changes)
        return f"{EXPECT_LINE} {self.code:<4} {self.said} -- {status}"


def record(
    verdicts: dict[str, dict], version: str, profile: str = "ci",
    deployment: tuple[str, ...] = (), properties: tuple[str, ...] = (),
    patch: dict | None = None,
) -> dict:
    """The expectation a run's ``verdicts`` (the plugin's JSON) makes; with
    ``deployment`` (the suite's ``--hitl-bus``/``--hitl-nodes``) and ``properties``
    (a subset of the catalog) the file says so, and later runs use them."""
    from properties.catalog import code_order  # pylint: disable=import-outside-toplevel

    return {
        "about": "What the property suite says on this release with the ci profile "
        "(derandomized): each property's verdict, what its search found on the way, "
        "and the windows its stories reached. `.ci/run` holds every run to it "
        "(`hitl-harness expect`); `hitl-harness expect --write` records a new one "
        "after an intended change.",
        "agentscope": version,
        "profile": profile,
        "hypothesis": toolchain.hypothesis_version(),
        **({"deployment": list(deployment)} if deployment else {}),
        **({"properties": list(properties)} if properties else {}),
        **({"patch": patch} if patch else {}),
        "verdicts": {
            code: {
                "verdict": verdicts[code]["verdict"],
                "also_found": sorted(verdicts[code].get("also_found") or {}, key=code_order),
                "reached": [w for w, n in (verdicts[code].get("windows") or {}).items() if n],
            }
            for code in sorted(verdicts, key=code_order)
        },
    }


def load(path: Path) -> dict:
    """The expectation in ``path``, its shape checked."""
    data = known_list.read_json(path, BadExpectation)
    verdicts = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(verdicts, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("verdict"), str) for v in verdicts.values()
    ):
        raise BadExpectation(f'{path}: expected an object with "verdicts" (property -> verdict)')
    return data


def compare(
    verdicts: dict[str, dict],
    expected: dict,
    known: list[known_list.Known],
    version: str,
    deployment: Deployment = Deployment(),
) -> list[Line]:
    """One :class:`Line` per property of the catalog (and per property the
    run or the file names that the catalog does not), the known list read
    for the ``deployment`` searched on."""
    from properties.catalog import BY_CODE, code_order  # pylint: disable=import-outside-toplevel

    wanted = expected["verdicts"]
    lines = []
    catalog = set(expected.get("properties") or BY_CODE)
    for code in sorted(catalog | set(verdicts) | set(wanted), key=code_order):
        got, want = verdicts.get(code), wanted.get(code)
        if got is None:
            lines.append(Line(code, "no verdict", ["the suite gave no verdict"]))
            continue
        changes = []
        if code not in BY_CODE:
            changes.append("no such property in the catalog")
        also = sorted(got.get("also_found") or {}, key=code_order)
        if want is None:  # nothing to compare with but the known findings
            want = {"verdict": got["verdict"], "also_found": also}
            changes.append("the expected verdicts have none for it")
        if got["verdict"] != want["verdict"]:
            changes.append(f"expected {want['verdict']}")
        # What a search meets on the way is another property's violation:
        # every one must be known, and one recorded that is no longer met
        # turns the line red (a known finding held only there would
        # otherwise go unnoticed); one met anew is said.
        gone = [c for c in want.get("also_found", []) if c not in also]
        if gone:
            changes.append(f"no longer found on the way: {_codes(gone)}")
        drift = (
            f"on the way this time {_codes(also)}, recorded {_codes(want.get('also_found'))}"
            if also != list(want.get("also_found", [])) else ""
        )
        counts = got.get("windows") or {}
        lost = [w for w in want.get("reached", []) if not counts.get(w)]
        if lost:
            changes.append(f"no longer reached: {', '.join(lost)}")
        if got["verdict"] == ERROR:
            changes.append(f"the search broke with no story: {got.get('actual') or 'see the log'}")
        broken = got["verdict"] not in ("holds", NOT_APPLICABLE, ERROR)
        said = [f"{got['verdict']}{_findings(known, code, [code], (version, deployment), broken, changes)}"]
        for other in also:
            said.append(f"also found {other}{_findings(known, other, [code], (version, deployment), True, changes)}")
        said.append(_windows(counts))
        said.append(drift)
        lines.append(Line(code, "; ".join(s for s in said if s), changes))
    return lines


def _findings(known, code: str, searches: list[str], where: tuple[str, Deployment],
              violated: bool, changes: list[str]) -> str:
    """`` (F1)`` for a violation the known list names on ``where`` (a
    release and a deployment); a change otherwise."""
    if not violated:
        return ""
    names, uncovered = known_list.findings(known, code, searches, *where)
    if uncovered:
        changes.append(f"{code} found by {', '.join(uncovered)}'s search is no known finding")
    return f" ({', '.join(names)})" if names else " (not known)"


def _codes(codes) -> str:
    return ", ".join(codes) if codes else "nothing"


def _windows(counts: dict[str, int]) -> str:
    reached = ", ".join(f"{w} ×{n}" for w, n in counts.items() if n)
    unreached = [w for w, n in counts.items() if not n]
    text = f"reached {reached}" if reached else ""
    if unreached:
        text += ("; " if text else "") + f"unreached {', '.join(unreached)}"
    return text


def expect(
    path: Path | None,
    *,
    known_path: Path | None = None,
    verdicts_json: Path | None = None,
    write: bool = False,
    workers: int = 2,
    counterexamples: Path = Path("counterexamples"),
    log: Path = Path("property-suite.log"),
    deployment: tuple[str, ...] = (),
    properties: tuple[str, ...] = (),
    patch: str | None = None,
) -> int:
    """Run the property suite (``ci`` profile) on the agentscope installed
    here, or read a run's ``--hitl-verdicts-json``; print one line per property
    against the expectation in ``path`` and the known violations in
    ``known_path`` (by default the project's own). 0 when every line is as expected,
    1 when one is not, 2 when an input cannot be read or the run broke, 3
    when a search broke with no story (ERROR). ``patch``: the user's patch
    layer (checked by the command line), installed in the suite's run; a
    file records the layer it was written with, and is held only to a run
    with the same one."""
    from harness.world import agentscope_under_test  # pylint: disable=import-outside-toplevel

    from .gate import runner  # pylint: disable=import-outside-toplevel

    from harness.world import patch_layer  # pylint: disable=import-outside-toplevel

    version = agentscope_under_test.version()
    layer = patch_layer.find(patch).record() if patch else {}
    searched_on = None
    try:
        known = known_list.load(known_path or FINDINGS / "known.json")
        if verdicts_json is not None:
            version, verdicts, searched_on = _read_verdicts(verdicts_json, version)
        path = path or default_path(version)
        said = None if write and not path.is_file() else load(path)
        note = None if write or said is None else toolchain.version_note(said.get("hypothesis"), str(path))
        if note:
            print(f"hitl-harness expect: {note}", file=sys.stderr)
        if said is not None:  # recorded again, a file keeps its properties
            properties = properties or tuple(said.get("properties") or ())
        deployment = _agreed_deployment(deployment, path, said, verdicts_json, searched_on)
        if said is not None and not write and (said.get("patch") or {}) != layer:
            raise BadExpectation(f"{path} was recorded with the patch layer "
                                 f"{said.get('patch') or 'none'}, this run has {layer or 'none'}")
        if verdicts_json is None:
            print(f"running the property suite (ci profile) on {agentscope_under_test.describe()}"
                  + (f" with the patch layer {layer['name']} ({layer['digest']})" if layer else "")
                  + f"; pytest's output: {log}", flush=True)
            result = anyio.run(functools.partial(
                runner.run_suite,
                Path(sys.executable), log=log, profile="ci", with_fix=False,
                counterexamples=counterexamples, workers=workers,
                say=lambda line: print(f"  {line}", flush=True),
                deployment=deployment + _selecting(properties)
                + (("--hitl-patch", patch) if patch else ()),
            ))
            if result.broken:
                raise BadExpectation(result.broken)
            verdicts = result.verdicts
        expected = None if write else said
    except (known_list.BadList, BadExpectation, DeploymentRefused) as bad:
        print(f"hitl-harness expect: error: {bad}", file=sys.stderr)
        return 2
    if write:
        path.write_text(json.dumps(record(verdicts, version, deployment=deployment,
                                          properties=properties, patch=layer), indent=2,
                                   ensure_ascii=False) + "\n",
                        encoding="utf-8")
        print(f"wrote the expected verdicts of agentscope {version} to {path}")
        return 0
    if expected.get("agentscope") != version:
        print(f"hitl-harness expect: error: {path} holds the verdicts of agentscope "
              f"{expected.get('agentscope')}, not of {version}", file=sys.stderr)
        return 2
    lines = compare(verdicts, expected, known, version, Deployment.from_options(deployment))
    for line in lines:
        print(line.render())
    changed = [line.code for line in lines if not line.ok]
    errors = [code for code in changed if (verdicts.get(code) or {}).get("verdict") == ERROR]
    print(f"expected verdicts ({path}): "
          + (f"{len(changed)} changed: {', '.join(changed)}" if changed
             else f"all {len(lines)} as expected")
          + (f"; the search of {', '.join(errors)} broke (ERROR, exit 3)" if errors else ""))
    return 3 if errors else 1 if changed else 0


def _selecting(properties: tuple[str, ...]) -> tuple[str, ...]:
    """pytest's ``-k`` for these properties only (none: every one)."""
    return ("-k", " or ".join(f"{code}-" for code in properties)) if properties else ()


def _agreed_deployment(
    asked: tuple[str, ...],
    path: Path,
    said: dict | None,
    verdicts_json: Path | None,
    searched_on: Deployment | None,
) -> tuple[str, ...]:
    """The suite's options for the deployment the run is (or was) searched
    on, which three sources must agree on, each when it says one: the
    command line's options (``asked``), the expectation read from ``path``
    (``said``), and the deployment a saved run was ``searched_on``. None
    saying one: the fake bus."""
    stated = {}
    if searched_on is not None:
        stated[f"{verdicts_json} was searched on"] = searched_on
    if asked:
        stated["the command line asks for"] = Deployment.from_options(asked)
    if said is not None:
        stated[f"{path} is of"] = Deployment.from_options(said.get("deployment") or [])
    if len(set(stated.values())) > 1:
        raise BadExpectation("; ".join(f"{who} {what}" for who, what in stated.items()))
    chosen = next(iter(stated.values()), Deployment())
    if verdicts_json is not None and searched_on is None:
        print(f"hitl-harness expect: note: {verdicts_json} does not say which deployment it was "
              f"searched on (written before verdicts said so); taken to be {chosen}",
              file=sys.stderr)
    return chosen.options()


def _read_verdicts(path: Path, version: str) -> tuple[str, dict[str, dict], Deployment | None]:
    """The agentscope version (``version`` if the file does not say), the
    verdicts of a run's ``--hitl-verdicts-json`` file, and the deployment they
    were searched on (``None``: a file from before it said)."""
    data = known_list.read_json(path, BadExpectation)
    verdicts = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(verdicts, dict):
        raise BadExpectation(f"{path}: not a --hitl-verdicts-json file")
    searched_on = data.get("deployment")
    if searched_on is not None:
        try:
            searched_on = Deployment.from_record(searched_on)
        except DeploymentRefused as bad:
            raise BadExpectation(f'{path}: "deployment" is {bad}') from None
    return str(data.get("agentscope_version") or version), verdicts, searched_on

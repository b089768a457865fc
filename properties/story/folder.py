"""A counterexample folder: ``<parent>/<property>-<short id>/`` holding
``report.md`` (:mod:`.report`), ``test_repro.py`` (:mod:`.repro`) and
``story.json`` (:mod:`.record`)."""
from __future__ import annotations

from pathlib import Path

from .record import Counterexample
from .report import render_report
from .repro import render_repro

#: Where counterexample folders go unless told otherwise.
DEFAULT_PARENT = "counterexamples"


def write(story: Counterexample, parent: str | Path = DEFAULT_PARENT) -> Path:
    """Write the folder (replacing an older copy) and return its path."""
    folder = Path(parent) / story.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "story.json").write_text(story.to_json(), encoding="utf-8")
    (folder / "report.md").write_text(render_report(story), encoding="utf-8")
    (folder / "test_repro.py").write_text(render_repro(story), encoding="utf-8")
    return folder

"""A counterexample folder: ``<parent>/<property>-<short id>/`` holding
``report.md`` (:mod:`.report`), ``test_repro.py`` (:mod:`.repro`) and
``story.json`` (:mod:`.record`).

The id names the program a story ran (:meth:`.Counterexample.identity`),
so a folder of that name already there holds the same story, written
again identically; one that holds a different story (an old format's id,
or eight hex digits shared by chance) is never overwritten."""
from __future__ import annotations

from pathlib import Path

from .record import Counterexample, UnreadableStory
from .report import NamedFinding, render_report
from .repro import render_repro

#: Where counterexample folders go unless told otherwise.
DEFAULT_PARENT = "counterexamples"


class FolderTaken(FileExistsError):
    """The folder a story would be written to holds another story (one line)."""


def write(story: Counterexample, parent: str | Path = DEFAULT_PARENT,
          finding: NamedFinding | None = None) -> Path:
    """Write the folder (rewriting the same story's) and return its path;
    raise :class:`FolderTaken` if it holds a different story. ``report.md``
    names ``finding`` when given (the known list lives above this layer)."""
    folder = Path(parent) / story.name
    _refuse_another_story(folder, story)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "story.json").write_text(story.to_json(), encoding="utf-8")
    (folder / "report.md").write_text(render_report(story, finding, folder), encoding="utf-8")
    (folder / "test_repro.py").write_text(render_repro(story), encoding="utf-8")
    return folder


def _refuse_another_story(folder: Path, story: Counterexample) -> None:
    if not (folder / "story.json").exists():
        return
    try:
        there = Counterexample.load(folder).identity()
    except UnreadableStory:
        there = None
    if there != story.identity():
        raise FolderTaken(
            f"{folder} holds a different story; not overwritten (move it away to write {story.name})",
        )

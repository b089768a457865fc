"""report.md's picture: a mermaid sequence diagram of the race, and an
environment block without paths."""
from __future__ import annotations

from pathlib import Path

from properties.story.diagram import MAX_ARROWS, sequence_diagram
from properties.story.record import Counterexample
from properties.story.report import render_report

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "findings" / "counterexamples" / "I9-df0f5ed0"


def test_the_stop_and_the_run_that_lost_it_are_drawn_in_order():
    story = Counterexample.load(FOLDER)
    picture = sequence_diagram(story.trace, "I9 no interrupt is lost")
    lines = picture.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert "    participant P1 as chat-run leader" in lines
    card = lines.index("    P1->>BUS: event REQUIRE_USER_CONFIRM")
    stop = next(n for n, l in enumerate(lines) if "receive session interrupt" in l)
    released = lines.index("    P1->>BUS: release_lock session lock leader")
    assert card < stop < released
    assert lines[-1] == "    Note over BUS: ✗ I9 no interrupt is lost"
    assert not any("#" in l or ";" in l for l in lines[1:]), "mermaid reads # and ; as syntax"


def test_a_long_story_keeps_its_last_arrows():
    trace = "\n".join(
        f"{n:4d}  {'chat-run:solo':<34} {'queue_push':<14} agentscope:inbox:solo  -> hint {n}"
        for n in range(1, MAX_ARROWS + 11)
    )
    lines = sequence_diagram(trace, "I5").splitlines()
    assert "    Note over BUS: 10 earlier operations (see the timeline)" in lines
    assert sum("->>" in l for l in lines) == MAX_ARROWS and lines[-2].endswith(f"hint {MAX_ARROWS + 10}")


def test_the_report_names_versions_not_paths():
    story = Counterexample.load(FOLDER)
    report = render_report(story)
    assert "```mermaid\nsequenceDiagram" in report
    # story.json keeps where agentscope came from, never a path; so does the report
    assert story.agentscope_path == "an installed distribution" and "/site-packages" not in report
    assert "imported from an installed distribution" in report
    assert "**Python:**" in report and "**Hypothesis:**" in report and "agentscope-hitl-harness:** 0." in report

"""How far the property suite's searches have got, while they run.

The gate runs the suite with ``--hitl-progress-file FILE``: every pytest process
of the run (each xdist worker) appends one JSON line to it per event, a
property's search started or one of its stories ended (and whether that
story failed: Hypothesis then shrinks it). The gate reads the file as it
grows (:class:`Reader`). Nothing here measures time: the gate does.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

#: The events: a property's search started; one of its stories ended.
STARTED, STORY = "started", "story"


class Writer:
    """The events of the searches this process runs, appended to ``path``
    (one ``write`` per line, so lines of several processes never mix)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.current: str | None = None
        self.stories: Counter = Counter()
        self.failed: Counter = Counter()

    def started(self, code: str) -> None:
        """``code``'s search starts in this process."""
        self.current = code
        self._write({"event": STARTED, "code": code})

    def story_ended(self, _searched, failed: bool) -> None:
        """A story of the search under way ended (a ``STORY_ENDED``
        listener of :mod:`properties.machine`)."""
        code = self.current
        if code is None:
            return
        self.stories[code] += 1
        self.failed[code] += bool(failed)
        self._write({"event": STORY, "code": code, "stories": self.stories[code],
                     "failed": self.failed[code]})

    def _write(self, event: dict) -> None:
        line = (json.dumps(event) + "\n").encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)


class Reader:
    """The events appended to ``path`` since the last :meth:`new_events`
    (a line still being written waits for its end)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def new_events(self) -> list[dict]:
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # not ours
        return events

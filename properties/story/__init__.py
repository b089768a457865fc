"""Stories written down and played back.

- :mod:`.record`: the :class:`~.record.Counterexample` record and
  ``story.json`` (versioned);
- :mod:`.witness`: the record a failing machine leaves behind;
- :mod:`.report`, :mod:`.repro`, :mod:`.narration`: ``report.md`` and
  ``test_repro.py``, in words;
- :mod:`.folder`: the three files together;
- :mod:`.playback`: a recorded story played again, step by step;
- :mod:`.shrink`: a failing story made short by deleting steps.
"""

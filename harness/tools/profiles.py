"""Hypothesis profiles: ``dev`` (quick, local), ``ci`` (derandomized, so a
gate gives the same verdict every time) and ``thorough`` (random, with the
example database, for hunting)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

#: Every phase but ``explain``: its extra replays of a failing example cost
#: minutes with a world this size, and the counterexample folder already
#: tells the story.
_PHASES = [p for p in Phase if p is not Phase.explain]

#: ``too_slow`` is suppressed (an example plays a whole app); every other
#: health check, ``filter_too_much`` included, is on: no property's search
#: throws away too many draws (none fails it on 2.0.8 with the ``ci``
#: profile).
_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    stateful_step_count=10,
    phases=_PHASES,
)


def register() -> None:
    """Register the three profiles (:func:`load_default` picks one)."""
    settings.register_profile(
        "dev",
        max_examples=60,
        database=None,
        print_blob=False,  # the counterexample folder is the reproduction
        **_COMMON,
    )
    settings.register_profile(
        "ci",
        max_examples=50,
        derandomize=True,
        database=None,
        print_blob=False,  # the counterexample folder is the reproduction
        **_COMMON,
    )
    settings.register_profile(
        "thorough",
        max_examples=1500,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
        print_blob=False,  # the counterexample folder is the reproduction
        **{**_COMMON, "stateful_step_count": 30},
    )


def load_default() -> None:
    """``ci`` when ``CI`` is set, else ``dev``."""
    settings.load_profile("ci" if os.environ.get("CI") else "dev")

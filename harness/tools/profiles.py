"""Hypothesis profiles: ``dev`` (quick, local), ``ci`` (derandomized, so a
gate gives the same verdict every time) and ``thorough`` (random, with the
example database, for hunting).

A ``thorough`` campaign's example database is ``.hypothesis/examples``, or
what ``$HITL_HARNESS_EXAMPLE_DB`` (pytest's ``--hitl-example-db``) names: a
``redis://host:port[/db]`` URL is Hypothesis' own ``RedisExampleDatabase``
on that server, which several runners share, so that a counterexample any
of them finds is replayed by all of them; anything else is a folder.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

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


def without_local_constants() -> None:
    """Give Hypothesis an empty pool of local constants, before any search.

    Hypothesis draws a share of its numbers from the literal constants of
    the local modules imported so far
    (``hypothesis.internal.conjecture.providers``): the project's, and
    agentscope's own when it is a checkout, whose modules it imports as
    stories need them. A derandomized search would then change with any
    literal anywhere in the project, with which tests ran before it, and
    with where agentscope is installed; a gate comparing a checkout with a
    release would compare two searches. With no local constants it depends
    on the rules and on agentscope's behaviour only. (A Hypothesis without
    the pool has nothing to empty.)"""
    from hypothesis.internal.conjecture import providers  # pylint: disable=import-outside-toplevel

    if hasattr(providers, "_get_local_constants"):
        empty = providers.Constants()
        providers._get_local_constants = lambda: empty  # pylint: disable=protected-access
        providers.CONSTANTS_CACHE.cache.clear()


#: The variable naming a ``thorough`` campaign's example database.
EXAMPLE_DB_ENV = "HITL_HARNESS_EXAMPLE_DB"

#: Where the harness's examples live on a shared Redis server.
REDIS_KEY_PREFIX = b"hitl-harness-example:"


def example_database(where: str | None = None) -> ExampleDatabase:
    """The example database ``where`` names (by default
    ``$HITL_HARNESS_EXAMPLE_DB``, else ``.hypothesis/examples``)."""
    where = where or os.environ.get(EXAMPLE_DB_ENV) or ".hypothesis/examples"
    if where.startswith(("redis://", "rediss://", "unix://")):
        import redis  # pylint: disable=import-outside-toplevel
        from hypothesis.extra.redis import RedisExampleDatabase  # pylint: disable=import-outside-toplevel

        return RedisExampleDatabase(redis.Redis.from_url(where), key_prefix=REDIS_KEY_PREFIX)
    return DirectoryBasedExampleDatabase(where)


def register(example_db: str | None = None) -> None:
    """Register the three profiles (:func:`load_default` picks one);
    ``example_db`` is the ``thorough`` profile's database (see
    :func:`example_database`)."""
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
        database=example_database(example_db),
        print_blob=False,  # the counterexample folder is the reproduction
        **{**_COMMON, "stateful_step_count": 30},
    )


def load_default() -> None:
    """``ci`` when ``CI`` is set, else ``dev``."""
    settings.load_profile("ci" if os.environ.get("CI") else "dev")

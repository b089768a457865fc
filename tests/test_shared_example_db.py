"""A ``thorough`` campaign on several runners shares one example database:
Hypothesis' own ``RedisExampleDatabase`` on a redis-server, named by
``$HITL_HARNESS_EXAMPLE_DB``. What one runner finds, another replays.

Two processes stand for two runners, on the tests' real redis-server. The
first searches I9's machine (agentscope loses a stop pressed once the
confirmation card shows, on every 2.0.x release: F3) and stops at the
first failing story, which Hypothesis saves. The second only replays what
the database holds (``Phase.reuse``, no generation), so it can fail only
with a story the first one saved: before the first has run, it holds.
"""
from __future__ import annotations

import os
import subprocess
import sys

import redis

from harness.tools import profiles
from harness.tools.profiles import EXAMPLE_DB_ENV, REDIS_KEY_PREFIX

#: One runner: ``find`` searches (seeded, so the same story every time;
#: derandomizing would turn the database off), ``replay`` plays what the
#: database holds and nothing else.
RUNNER = """
import sys
import unittest
from hypothesis import Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test
from harness.tools import profiles
from properties.machine import machine_for
from properties.story.program import story_steps
from properties.violation import InvariantViolated

profiles.register()
thorough = settings.get_profile("thorough")
print(type(thorough.database).__name__)
if sys.argv[1] == "find":
    machine = seed(2)(machine_for("I9"))
    run = settings(thorough, phases=[Phase.generate], max_examples=100, stateful_step_count=10)
else:
    machine = machine_for("I9")
    run = settings(thorough, phases=[Phase.reuse])
try:
    run_state_machine_as_test(machine, settings=run)
except InvariantViolated as violation:
    print(violation.code, story_steps(violation))
except unittest.SkipTest:  # what Hypothesis raises when it ran no example
    print("nothing to replay")
else:
    print("held")
"""


def _runner(url: str, mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, mode],
        env={**os.environ, EXAMPLE_DB_ENV: url},
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def test_a_counterexample_one_runner_finds_another_replays_from_redis(redis_server):
    server = redis_server()
    server.flush()
    url = f"redis://{server.host}:{server.port}/0"
    assert _runner(url, "replay") == ["RedisExampleDatabase", "nothing to replay"]
    database, found = _runner(url, "find")
    assert database == "RedisExampleDatabase"
    assert found.startswith("I9 [") and "user_interrupts" in found, found
    raw = redis.Redis(host=server.host, port=server.port)  # keys are bytes, not text
    assert raw.keys(REDIS_KEY_PREFIX + b"*"), "the first runner saved nothing"
    raw.close()
    assert _runner(url, "replay") == [database, found]


def test_the_example_database_is_a_folder_unless_a_redis_url_names_one(tmp_path, monkeypatch):
    monkeypatch.delenv(EXAMPLE_DB_ENV, raising=False)
    assert profiles.example_database().path.as_posix().endswith(".hypothesis/examples")
    assert profiles.example_database(str(tmp_path)).path == tmp_path
    monkeypatch.setenv(EXAMPLE_DB_ENV, "redis://127.0.0.1:1/3")
    shared = profiles.example_database()
    assert type(shared).__name__ == "RedisExampleDatabase"
    assert shared.redis.connection_pool.connection_kwargs["db"] == 3

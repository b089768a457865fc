"""A session whose storage keeps failing, beside a healthy one: the story
I17's search tells, played on the installed release. Released agentscope
loses its dispatcher to the first failure (F4), and the healthy session's
payload waits; with dispatcher-survival the poisoned trigger is given up
after a bounded number of tries and the healthy one is dispatched; a fix
that retries for ever is reported as I17 within seconds."""
from __future__ import annotations

import time

import pytest

import reference_fix
from properties.story.playback import playing
from properties.violation import InvariantViolated
from reference_fix.source_patch import SourcePatch

STORY = dict(cast=["leader", "solo"], storage_faults=True, bus_faults=True, crashes=True)

#: dispatcher-survival as it first was: every failed dispatch re-queued
#: after 0.1 s, for ever.
RETRIES_FOR_EVER = SourcePatch(
    name="retries-for-ever", module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher", method="_drain_and_dispatch",
    before="""\
            await self._dispatch_one(
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                kind=kind,
                raw_input=payload.get("input"),
            )
""",
    after="""\
            try:
                await self._dispatch_one(
                    user_id=user_id,
                    session_id=session_id,
                    agent_id=agent_id,
                    kind=kind,
                    raw_input=payload.get("input"),
                )
            except Exception:  # pylint: disable=broad-except
                self._schedule_retry(user_id, session_id, agent_id, kind, None)
""",
    targets=("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11"), covers=(),
    what="a failed dispatch is retried every 0.1 s for ever",
)


def _violations(enforcing: str, deliveries: int = 1) -> str | None:
    try:
        with playing(enforcing=[enforcing], **STORY) as story:
            story.storage_keeps_failing(session="solo")
            for _ in range(deliveries):
                story.payload_arrives(source="channel", to="solo")
            story.payload_arrives(source="channel", to="leader")
            story.everything_settles()
            return None
    except InvariantViolated as violation:
        return str(violation)


@pytest.fixture
def unfixed():
    was = reference_fix.is_applied()
    if was:
        reference_fix.remove()
    yield
    if was:
        reference_fix.apply()


def test_released_agentscope_loses_its_dispatcher_to_one_failing_session(unfixed):
    assert (_violations("I13") or "").startswith("I13")


def test_with_dispatcher_survival_the_poisoned_trigger_is_given_up_and_the_healthy_one_dispatched(unfixed):
    patches = [p for p in reference_fix.FIXES["dispatcher-survival"] if p.refusal() is None]
    for patch in patches:
        patch.apply()
    try:
        for code in ("I17", "I13", "I5", "I11"):
            assert _violations(code) is None, code
    finally:
        for patch in reversed(patches):
            patch.remove()


def test_deliveries_to_the_poisoned_session_do_not_multiply_its_retries(unfixed):
    """Six payloads to the broken session, each queuing a wake: the wakes
    that fail while one waits out its backoff are coalesced into it, so
    the session's storage is not tried ten times per payload (I17 met it
    so in Redis mode: 51 tries for five wakes)."""
    patches = [p for p in reference_fix.FIXES["dispatcher-survival"] if p.refusal() is None]
    for patch in patches:
        patch.apply()
    try:
        assert _violations("I17", deliveries=6) is None
    finally:
        for patch in reversed(patches):
            patch.remove()


def test_a_fix_that_retries_for_ever_is_reported_within_seconds(unfixed):
    RETRIES_FOR_EVER.apply()
    try:
        started = time.perf_counter()
        found = _violations("I17") or ""
        assert found.startswith("I17") and "only repeats itself" in found
        assert time.perf_counter() - started < 30
    finally:
        RETRIES_FOR_EVER.remove()

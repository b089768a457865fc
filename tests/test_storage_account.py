"""The account the world keeps of storage writes: which session each one
may have changed (an observation reads a session again only then) and
which sessions were made (a story's clean-up deletes them)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.world.storage_account import AccountedStorage



@dataclass
class Made:
    id: str
    agent_id: str


class Store:
    """The parts of agentscope's storage API the account reads."""

    async def get_session(self, user_id, agent_id, session_id):
        return session_id

    async def update_session_state(self, user_id, agent_id, session_id, state):
        return None

    async def upsert_session(self, user_id, agent_id, config, state=None, session_id=None):
        if config == "refused":
            raise ValueError("refused")
        return Made(session_id or f"s-{agent_id}", agent_id)

    async def delete_session(self, user_id, agent_id, session_id):
        return True

    async def upsert_team(self, user_id, team):
        return "t"


def test_a_write_naming_a_session_changes_that_sessions_version_only(kernel):
    storage = AccountedStorage(Store(), kernel)
    a, b = storage.version_of("a"), storage.version_of("b")
    kernel.run_uncontrolled(storage.get_session("u", "", "a"))
    assert (storage.version_of("a"), storage.version_of("b")) == (a, b)
    kernel.run_uncontrolled(storage.update_session_state("u", "x", session_id="a", state=None))
    assert storage.version_of("a") != a and storage.version_of("b") == b
    a = storage.version_of("a")
    kernel.run_uncontrolled(storage.upsert_session("u", "agent-1", config=None))
    assert storage.version_of("s-agent-1") != (0, 0) and storage.version_of("a") == a


@pytest.mark.parametrize("write", ["a write naming no session", "a delete", "a write that failed"])
def test_a_write_that_may_have_changed_any_session_changes_every_version(kernel, write):
    storage = AccountedStorage(Store(), kernel)
    a = storage.version_of("a")
    if write == "a write naming no session":
        kernel.run_uncontrolled(storage.upsert_team("u", "team"))
    elif write == "a delete":  # a leader's takes its team members' sessions with it
        kernel.run_uncontrolled(storage.delete_session("u", "x", "leader"))
    else:
        with pytest.raises(ValueError):
            kernel.run_uncontrolled(storage.upsert_session("u", "agent-1", config="refused", session_id="a"))
    assert storage.version_of("a") != a


def test_the_sessions_upserted_are_known_once_each_until_an_upsert_does_not_finish(kernel):
    storage = AccountedStorage(Store(), kernel)
    kernel.run_uncontrolled(storage.upsert_session("u", "agent-1", config=None))
    kernel.run_uncontrolled(storage.upsert_session("u", "agent-2", config=None, session_id="s-2"))
    kernel.run_uncontrolled(storage.upsert_session("u", "agent-1", config=None))  # an update
    assert storage.sessions_upserted() == [("agent-1", "s-agent-1"), ("agent-2", "s-2")]
    with pytest.raises(ValueError):
        kernel.run_uncontrolled(storage.upsert_session("u", "agent-3", config="refused"))
    assert storage.sessions_upserted() is None

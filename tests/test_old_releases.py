"""agentscope 2.0.3-2.0.6: the per-release seam of the inbox hand-off, and
the "not applicable" verdict of properties about what those releases lack.

The installed release is the pinned one (2.0.8), so these tests hand the
seam the shape of an older ``agentscope.app._bus_ops`` and
``MessageBusKeys`` (no ``deliver_to_inbox``, no inbox lock, no consumer
registry) and check what it selects. The real run on 2.0.6 is the gate's
(``hitl-harness gate 2.0.6``, in docs/findings.md), not a test here:
building a 2.0.6 environment takes a download and a minute.
"""
from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from agentscope.app import _bus_ops
from agentscope.app.message_bus import MessageBusKeys

from harness.tools.gate import compare
from harness.tools.gate.outcomes import NOT_APPLICABLE, Exit, Row
from harness.tools.gate.junit import write_junit
from harness.tools.gate.table import table
from harness.world import surface
from properties import windows
from properties.catalog import BY_CODE, PROPERTIES


class OldKeys:
    """``MessageBusKeys`` as 2.0.5 has it: an inbox, no inbox lock, no
    consumer registry, no ``message`` trigger kind."""

    inbox = staticmethod(MessageBusKeys.inbox)
    session_lock = staticmethod(MessageBusKeys.session_lock)
    wakeup_queue = staticmethod(MessageBusKeys.wakeup_queue)
    wakeup_signal = staticmethod(MessageBusKeys.wakeup_signal)
    WAKEUP_KIND_WAKE = MessageBusKeys.WAKEUP_KIND_WAKE


#: ``_bus_ops`` as 2.0.3-2.0.6 have it: the trigger queue, no hand-off.
OLD_BUS_OPS = SimpleNamespace(enqueue_run_trigger=_bus_ops.enqueue_run_trigger)


class RecordingBus:
    """The two bus operations a producer makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict]] = []

    async def queue_push(self, key, payload, *, ttl_secs=None):
        self.calls.append(("queue_push", key, payload))

    async def publish(self, key, payload):
        self.calls.append(("publish", key, payload))


OLD_ABSENT = surface.absent_features(
    surface.inbox_protocol(OLD_BUS_OPS, OldKeys), chat_service=object, keys=OldKeys,
)


# ── the seam ──────────────────────────────────────────────────────────


def test_a_release_with_deliver_to_inbox_is_driven_through_it():
    protocol = surface.inbox_protocol()
    assert protocol.deliver is _bus_ops.deliver_to_inbox
    assert protocol.hand_off == "deliver_to_inbox"
    assert protocol.turn_tail[0] == "acquire_lock"
    assert protocol.turn_tail[1]("s") == MessageBusKeys.inbox_lock("s")
    assert protocol.consumer_key("s") == MessageBusKeys.inbox_consumer("s")
    assert surface.INBOX == protocol and surface.deliver_to_inbox is _bus_ops.deliver_to_inbox
    assert surface.ABSENT == {}  # the pinned release lacks nothing a property is about


def test_a_release_without_it_pushes_then_wakes_as_its_producers_did():
    protocol = surface.inbox_protocol(OLD_BUS_OPS, OldKeys)
    assert protocol.hand_off == "queue_push, then enqueue_run_trigger"
    assert protocol.consumer_key is None and protocol.inbox_lock_key is None
    # No turn-tail check: a run's turn is done when it is about to let go
    # of its session.
    assert protocol.turn_tail[0] == "release_lock"
    assert protocol.turn_tail[1]("s") == MessageBusKeys.session_lock("s")
    bus = RecordingBus()
    payload = {"type": "hint", "hint": "from a teammate"}
    asyncio.run(protocol.deliver(bus, user_id="u", session_id="s", agent_id="a", payload=payload))
    # TeamSay's two calls in 2.0.6: the push, then the wake trigger (whose
    # signal is enqueue_run_trigger's own publish), and nothing else.
    assert [(op, key) for op, key, _ in bus.calls] == [
        ("queue_push", MessageBusKeys.inbox("s")),
        ("queue_push", MessageBusKeys.wakeup_queue()),
        ("publish", MessageBusKeys.wakeup_signal()),
    ]
    assert bus.calls[0][2] == payload
    trigger = bus.calls[1][2]
    assert (trigger["session_id"], trigger["agent_id"], trigger["kind"]) == ("s", "a", "wake")


def test_a_release_with_neither_cannot_be_driven():
    with pytest.raises(ImportError, match="neither deliver_to_inbox nor enqueue_run_trigger"):
        surface.inbox_protocol(SimpleNamespace(), OldKeys)


def test_what_an_old_release_lacks_is_named_with_the_release_that_brought_it():
    assert set(OLD_ABSENT) == {surface.REGISTRATION, surface.LEADER_REMINDER, surface.CHANNEL_MESSAGE}
    assert "2.0.7" in OLD_ABSENT[surface.REGISTRATION]
    assert "_notify_leader_of_failure" in OLD_ABSENT[surface.LEADER_REMINDER]


def test_wiring_arguments_an_older_manager_has_no_parameter_for_are_left_out():
    def old(storage, message_bus):
        return storage, message_bus

    def new(storage, message_bus, workspace_manager=None, **more):
        return storage, message_bus, workspace_manager, more

    given = {"storage": 1, "message_bus": 2, "workspace_manager": 3}
    assert surface.taken_by(old, **given) == {"storage": 1, "message_bus": 2}
    assert surface.taken_by(new, **given) == given
    with pytest.raises(TypeError):  # a parameter it needs is still needed
        old(**surface.taken_by(old, storage=1))


# ── not applicable ────────────────────────────────────────────────────


def test_properties_about_what_an_old_release_lacks_are_not_applicable_there():
    missing = {p.code: p.not_applicable(OLD_ABSENT) for p in PROPERTIES}
    assert {c for c, why in missing.items() if why} == {"I2", "I3"}
    assert "consumer registration" in missing["I3"]
    assert BY_CODE["I10"].not_applicable(OLD_ABSENT) is None
    assert BY_CODE["I10"].parts_left_out(OLD_ABSENT) == [
        f"the leader is told of each failure once: {OLD_ABSENT[surface.LEADER_REMINDER]}",
    ]
    assert BY_CODE["I8"].parts_left_out(OLD_ABSENT) == [
        f"a message from a channel: {OLD_ABSENT[surface.CHANNEL_MESSAGE]}",
    ]
    assert all(p.not_applicable() is None and not p.parts_left_out() for p in PROPERTIES)


def test_windows_of_the_registration_are_not_applicable_without_it():
    slugs = [w.slug for w in windows.WINDOWS]
    assert set(windows.not_applicable(slugs, OLD_ABSENT)) == {
        "inbox-check-finds-0", "inbox-check-finds-1", "inbox-check-finds-2+",
        "producer-check-then-act", "run-dies-registered", "stop-in-parked-clean-up",
    }
    assert windows.not_applicable(slugs) == {}


def _na_row(baseline_verdict: str = "holds") -> tuple[Row, Row]:
    why = OLD_ABSENT[surface.REGISTRATION]
    old = Row(name="2.0.6", version="2.0.6", verdicts={
        "I3": {"title": "t", "verdict": NOT_APPLICABLE, "why": why, "counterexample": None,
               "also_found": {}},
        "I5": {"title": "t", "verdict": "VIOLATED", "counterexample": "cx/I5", "also_found": {}},
    })
    new = Row(name="2.0.11", version="2.0.11", verdicts={
        "I3": {"title": "t", "verdict": baseline_verdict, "counterexample": None, "also_found": {}},
        "I5": {"title": "t", "verdict": "holds", "counterexample": None, "also_found": {}},
    })
    return old, new


def test_a_not_applicable_verdict_is_neither_held_nor_violated():
    old, new = _na_row()
    old.judge()
    assert compare.violations(old) == {"I5": ["I5"]}
    compare.classify(old, None, [])
    assert old.comparison["I3"] == {"classification": NOT_APPLICABLE}
    assert old.new == ["I5"]
    # Upgrading from it: what held nowhere before is not "fixed" either.
    new.role = "candidate"
    compare.classify(new, old, [])
    assert new.comparison["I3"]["classification"] == "holds"
    assert new.comparison["I5"]["classification"] == "fixed"
    assert new.new == []
    # A property violated on the candidate that was not applicable on the
    # baseline is new: it fails the gate.
    _, broken = _na_row("VIOLATED")
    compare.classify(broken, old, [])
    assert broken.comparison["I3"]["classification"] == "new" and broken.new == ["I3"]


def test_the_table_and_junit_say_not_applicable_and_why(tmp_path):
    old, _ = _na_row()
    old.judge()
    assert old.outcome == Exit.VIOLATED  # I5, not I3
    shown = table([old])
    assert "n/a" in shown.splitlines()[1]
    assert any(line.strip().startswith("n/a not applicable") for line in shown.splitlines())  # legend
    assert f"2.0.6: I3 not applicable: {OLD_ABSENT[surface.REGISTRATION]}" in " ".join(shown.split())
    junit = tmp_path / "j.xml"
    write_junit([old], junit)
    cases = {c.get("name").split()[0]: c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["I3"].find("skipped").get("message").startswith("I3 not applicable: ")
    assert cases["I3"].find("failure") is None and cases["I5"].find("failure") is not None


def test_the_plugin_turns_a_not_applicable_skip_into_that_verdict(monkeypatch):
    from harness.tools import pytest_plugin, verdicts  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(pytest_plugin, "_VERDICTS", {})
    why = OLD_ABSENT[surface.REGISTRATION]
    for outcome, tags in (("skipped", [("not_applicable", why)]), ("skipped", [])):
        report = pytest.TestReport(
            "properties/test_invariants_hold.py::t[I3]", ("f", 0, "t"), {}, outcome,
            ("f", 0, f"Skipped: not applicable: {why}"), "call",
            user_properties=[("property", ("I3", "no-dangling-inbox-consumer")), *tags],
        )
        pytest_plugin.pytest_runtest_logreport(report)
        verdict = pytest_plugin._VERDICTS["I3"]  # pylint: disable=protected-access
        assert verdict["verdict"] == (NOT_APPLICABLE if tags else "skipped")
        assert verdict.get("why") == (why if tags else None)
        if tags:  # the summary says why, under the verdict
            assert verdicts.summary_lines({"I3": verdict})[1].strip() == why

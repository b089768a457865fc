"""The suite's machines report each property when agentscope breaks it.

``tests/test_invariants_fire.py`` feeds each check a broken observation;
these tests go through everything the property suite does instead: the
property's own machine (its catalog record's flags and cast), its rules,
its step and end-of-story checks. A property cut off from the machine (no
longer among its step checks, unhooked from its observation, pointed at a
wrong key) fails here.

Two kinds, said per property:

- **broken on purpose**: a small source patch of agentscope of this file's
  own (a :class:`~reference_fix.source_patch.SourcePatch`, applied for the
  one story and removed after; not a reference fix) and a short story that
  reaches the breakage. The same story on agentscope as released must not
  report the property, so the patch, not the story, is what breaks it.
- **violated by the release**: where every release the fixes target
  already violates the property, its known finding's story must be
  reported, and hold with that finding's reference fix.

Stories are played back (no search), so each takes a second or two.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import reference_fix
from harness.world import agentscope_under_test
from properties.catalog import BY_CODE, PROPERTIES
from properties.machine import FOUND_ON_THE_WAY, HitlMachine
from properties.rules.vocabulary import PAST_EVERY_LEASE
from properties.story.playback import StoryEndedEarly, playing
from properties.violation import InvariantViolated
from reference_fix.source_patch import SourcePatch

#: Releases the patches below were written against (each refuses a
#: release whose code is not the text it replaces).
RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

BUS_OPS = "agentscope.app._bus_ops"
CHAT = "agentscope.app._service._chat"


def _breaks(code: str, what: str, module: str, cls: str | None, method: str,
            before: str, after: str) -> SourcePatch:
    return SourcePatch(
        name=f"break-{code}", module=module, cls=cls, method=method, before=before,
        after=after, targets=RELEASES, covers=(), what=what,
    )


@dataclass(frozen=True)
class Breakage:
    """How a story makes property ``code`` fail, and with what."""

    code: str
    story: Callable[..., None]
    patch: SourcePatch | None = None  # broken on purpose
    fix: str | None = None  # violated by the release: the reference fix that clears it

    @property
    def kind(self) -> str:
        return "broken on purpose" if self.patch is not None else "violated by the release"


Story = Callable[[HitlMachine], None]


def step(rule: str, **arguments) -> Story:
    """One step of a story: ``rule`` called with ``arguments``, as a
    played-back counterexample calls it."""
    return lambda machine: getattr(machine, rule)(**arguments)


def story(*steps: Story) -> Story:
    def play(machine: HitlMachine) -> None:
        for each in steps:
            each(machine)
    return play


def sends(session: str = "solo", turn: str = "answers") -> Story:
    return step("user_sends_message", session=session, model_turn=turn)


SETTLES = step("everything_settles")
CHANNEL_PAYLOAD = step("payload_arrives", source="channel", to="solo")
PARKS = story(sends(turn="calls GatedAction"), step("run_continues", session="solo"))


# ── broken on purpose ────────────────────────────────────────────────

I1 = _breaks(
    "I1", "a turn fails as soon as it has started", CHAT, "ChatService", "_run_impl",
    "                                elif reply_msg is not None:\n"
    "                                    reply_msg.append_event(event)\n",
    "                                elif reply_msg is not None:\n"
    "                                    raise RuntimeError(\"broken on purpose\")\n",
)

I2 = _breaks(
    "I2", "a worker's completed reply is reported to its leader as a failure", CHAT,
    "ChatService", "_run_impl",
    "                            if msg.finished_reason in (\n"
    "                                ReplyFinishedReason.ERROR,\n",
    "                            if msg.finished_reason in (\n"
    "                                ReplyFinishedReason.COMPLETED,\n"
    "                                ReplyFinishedReason.ERROR,\n",
)

I3 = _breaks(
    "I3", "the turn-tail inbox check finding nothing keeps the consumer registration",
    BUS_OPS, None, "has_pending_inbox_or_release",
    "        if not payloads:\n"
    "            await bus.registry_del(\n"
    "                MessageBusKeys.inbox_consumer(session_id),\n"
    "                MessageBusKeys.INBOX_CONSUMER_FIELD,\n"
    "            )\n"
    "            return False\n",
    "        if not payloads:\n"
    "            return False\n",
)

I4 = _breaks(
    "I4", "a wake-up of a parked session stops its pending calls", CHAT, "ChatService", "_run_impl",
    "                if self._skip_parked_wakeup(session_id, agent, input_msg):\n"
    "                    return\n",
    "                if self._skip_parked_wakeup(session_id, agent, input_msg):\n"
    "                    input_msg = UserInterruptEvent(reply_id=agent.state.reply_id)\n",
)

I5 = _breaks(
    "I5", "the turn-tail inbox check puts back all but the first payload it found",
    BUS_OPS, None, "has_pending_inbox_or_release",
    "        for payload in payloads:\n",
    "        for payload in payloads[1:]:\n",
)

I6 = _breaks(
    "I6", "the run registry spawns a second run of a session that has one in flight",
    "agentscope.app._manager._chat_run_registry", "ChatRunRegistry", "spawn",
    "        if existing is not None and not existing.done():\n",
    "        if False:\n",
)

I7 = _breaks(
    "I7", "a resumed run stops before giving the agent the user's answer", CHAT,
    "ChatService", "_run_impl",
    "                            continuation_start = ReplyStartEvent(\n",
    "                            break\n"
    "                            continuation_start = ReplyStartEvent(\n",
)

I10 = _breaks(
    "I10", "a new reply's end is published twice", CHAT, "ChatService", "_run_impl",
    "                                elif reply_msg is not None:\n"
    "                                    reply_msg.append_event(event)\n",
    "                                elif reply_msg is not None:\n"
    "                                    reply_msg.append_event(event)\n"
    "                                if isinstance(event, ReplyEndEvent):\n"
    "                                    await publish_session_event(\n"
    "                                        self._message_bus,\n"
    "                                        session_id,\n"
    "                                        event.model_dump(mode=\"json\"),\n"
    "                                    )\n",
)

I11 = _breaks(
    "I11", "a delivery to an idle session never wakes it", BUS_OPS, None, "deliver_to_inbox",
    "    if consumer is None:\n",
    "    if False:\n",
)

I12 = _breaks(
    "I12", "a denied call is resumed as confirmed", CHAT, "ChatService", "_run_impl",
    "                            reply_msg = await self._storage.get_message(\n",
    "                            if isinstance(input_msg, UserConfirmResultEvent):\n"
    "                                input_msg = input_msg.model_copy(update={\"confirm_results\": [\n"
    "                                    r.model_copy(update={\"confirmed\": True})\n"
    "                                    for r in input_msg.confirm_results\n"
    "                                ]})\n"
    "                            reply_msg = await self._storage.get_message(\n",
)

I15 = _breaks(
    "I15", "the chat endpoint refuses every message", "agentscope.app._router._chat", None, "chat",
    "    try:\n        chat_run_registry.spawn(\n",
    "    try:\n        raise RuntimeError(\"broken on purpose\")\n        chat_run_registry.spawn(\n",
)

#: A fix that reads every cancel as the user's stop, as a shutdown's is not.
I16 = _breaks(
    "I16", "any cancel after parking ends the parked reply", CHAT, "ChatService", "_run_impl",
    "                    input_msg = None\n\n            finally:\n",
    "                    input_msg = None\n\n"
    "            except asyncio.CancelledError:\n"
    "                if agent.state.has_awaiting_tool_calls(agent.name):\n"
    "                    await enqueue_run_trigger(\n"
    "                        self._message_bus,\n"
    "                        user_id=user_id,\n"
    "                        session_id=session_id,\n"
    "                        agent_id=agent_id,\n"
    "                        kind=MessageBusKeys.WAKEUP_KIND_RESUME,\n"
    "                        inputs=UserInterruptEvent(reply_id=agent.state.reply_id),\n"
    "                    )\n"
    "                raise\n"
    "            finally:\n",
)

#: A retry that multiplies itself: every lock-held retry queues its trigger twice.
I17 = _breaks(
    "I17", "a lock-held retry queues its trigger twice", "agentscope.app._manager._wakeup_dispatcher",
    "WakeupDispatcher", "_schedule_retry",
    "                await enqueue_run_trigger(\n",
    "                await enqueue_run_trigger(\n"
    "                    self._bus,\n"
    "                    user_id=user_id,\n"
    "                    session_id=session_id,\n"
    "                    agent_id=agent_id,\n"
    "                    kind=kind,\n"
    "                    inputs=input_msg,\n"
    "                )\n"
    "                await enqueue_run_trigger(\n",
)

I18 = _breaks(
    "I18", "a deleted session's bus state is not purged", "agentscope.app._service._session", "SessionService",
    "_purge_session_bus",
    "        await self._bus.log_trim(\n",
    "        return\n        await self._bus.log_trim(\n",
)

I19 = _breaks(
    "I19", "a refusal for a run in flight says the session waits for an answer", "agentscope.app._router._chat",
    None, "chat",
    "            detail=str(e),\n",
    "            detail=f\"Session {request.session_id!r} is waiting for the answer to 1 tool call(s).\",\n",
)


def _lease_runs_out(machine: HitlMachine) -> None:
    """Time passes beyond every lease (no rule waits that long at once)."""
    machine.world.pass_time(PAST_EVERY_LEASE)


def _answers(decision: str) -> Story:
    return step("user_answers_confirmation", session="solo", decision=decision, posted_to_leader=False)


BREAKAGES = (
    Breakage("I1", sends(), patch=I1),
    Breakage("I2", story(step("leader_invites_worker", worker_first_turn="answers"), SETTLES), patch=I2),
    Breakage("I3", story(sends(), step("run_continues", session="solo")), patch=I3),
    Breakage("I4", story(PARKS, CHANNEL_PAYLOAD, SETTLES), patch=I4),
    Breakage("I5", story(sends(), CHANNEL_PAYLOAD, SETTLES), patch=I5),
    # The lock's heartbeat fails, its lease runs out under the run held at
    # its turn tail, and the user writes again.
    Breakage("I6", story(sends(), step("bus_operation_fails", operation="renewal of session lock",
                                       session="solo"), _lease_runs_out, sends()), patch=I6),
    Breakage("I7", story(PARKS, _answers("confirms"), SETTLES), patch=I7),
    Breakage("I10", story(sends("leader"), SETTLES), patch=I10),
    Breakage("I11", story(sends(), SETTLES, CHANNEL_PAYLOAD, SETTLES), patch=I11),
    Breakage("I12", story(PARKS, _answers("denies"), SETTLES), patch=I12),
    Breakage("I15", sends(), patch=I15),
    # The node restarts while leader's run, its card shown, is at its turn tail.
    Breakage("I16", story(sends("leader", "calls GatedAction"), step("node_restarts"), SETTLES), patch=I16),
    # The second message finds the first one's run in flight.
    Breakage("I19", story(sends(), sends()), patch=I19),
    # solo is parked with a payload waiting in its inbox when it is deleted.
    Breakage("I18", story(PARKS, CHANNEL_PAYLOAD, step("user_deletes_session", session="solo"), SETTLES),
             patch=I18),
    # solo's run holds its lock at its turn tail while the job's result waits.
    Breakage("I17", story(sends(turn="calls ExternalJob"), step("external_result_arrives", session="solo"),
                          SETTLES), patch=I17),
    # ── violated by the release ──────────────────────────────────────
    Breakage("I8", story(PARKS, step("user_messages_parked_session", session="solo", via="chat endpoint"),
                         SETTLES), fix="message-while-parked"),
    Breakage("I20", story(PARKS, step("user_messages_parked_session", session="solo", via="chat endpoint"),
                          SETTLES), fix="message-while-parked"),
    Breakage("I9", story(sends("leader", "calls GatedAction"), step("user_interrupts", session="leader"),
                         SETTLES), fix="stop-after-parking"),
    Breakage("I13", story(PARKS, step("bus_operation_fails", operation="subscription to wake-up signals",
                                      session="solo"), CHANNEL_PAYLOAD, SETTLES), fix="resubscribe"),
    Breakage("I14", story(sends("leader", "starts a background job"), step("user_interrupts", session="leader"),
                          SETTLES, step("background_job_finishes", session="leader")),
             fix="stop-reaches-slow-tools"),
)
BY_PROPERTY = {b.code: b for b in BREAKAGES}


def _play(breakage: Breakage) -> InvariantViolated | None:
    """Play the story on the property's own machine; the violation of that
    property it reports, if any (others are found on the way)."""
    record = BY_CODE[breakage.code]
    FOUND_ON_THE_WAY.clear()
    try:
        with playing(enforcing=[record.code], **record.machine) as machine:
            breakage.story(machine)
    except InvariantViolated as violation:
        if violation.code == record.code:
            return violation
        raise
    finally:
        FOUND_ON_THE_WAY.clear()
    return None


def _with(patches, play):
    applied = []
    try:
        for patch in patches:
            patch.apply()
            applied.append(patch)
        return play()
    finally:
        for patch in reversed(applied):
            patch.remove()


def test_every_property_has_a_breakage():
    assert [p.code for p in PROPERTIES if p.code not in BY_PROPERTY] == []


@pytest.mark.parametrize("breakage", BREAKAGES, ids=lambda b: f"{b.code}-{b.kind.replace(' ', '-')}")
def test_the_suite_reports_the_property_agentscope_breaks(breakage: Breakage):
    if breakage.patch is not None:
        found = _with([breakage.patch], lambda: _play(breakage))
        assert found is not None, f"{breakage.code}'s machine did not report: {breakage.patch.what}"
        assert _play(breakage) is None, (
            f"{breakage.code}'s story fails on agentscope as released: the patch proves nothing"
        )
        return
    patches = reference_fix.FIXES[breakage.fix]
    assert any(p.refusal() is None for p in patches), (
        f"the {breakage.fix} fix does not target {agentscope_under_test.describe()}"
    )
    found = _play(breakage)
    assert found is not None, f"{agentscope_under_test.describe()} no longer violates {breakage.code} here"
    with warnings.catch_warnings():
        # A fixed agentscope may make a later step impossible (I14's job is
        # cancelled with its reply, so it never finishes): the story ends
        # there, settled and checked.
        warnings.simplefilter("ignore", StoryEndedEarly)
        fixed = _with([p for p in patches if p.refusal() is None], lambda: _play(breakage))
    assert fixed is None, f"with the {breakage.fix} fix, {breakage.code} still fails: {fixed}"

"""Pairwise reach: hand-off operations are classified by party and kind,
orders of two parties' operations are counted, and the verdict names the
orders the protocol allows that no story played."""
from __future__ import annotations

from collections import Counter

from harness.kernel.trace import Trace
from harness.tools import verdicts
from properties import reach
from properties.story.playback import playing

S, T = "sid-1", "sid-2"
LOCK, INBOX, REG = f"agentscope:inbox:lock:{S}", f"agentscope:inbox:{S}", f"agentscope:inbox:consumer:{S}#running"
SESSION_LOCK, WAKEUPS = f"agentscope:session:lock:{S}", "agentscope:wakeups"
RUN, PRODUCER, DISPATCHER = "chat-run:solo", "» channel delivers to solo", "wakeup-dispatcher"


def _entries(*ops: tuple[str, str, str, str]):
    trace = Trace()
    for task, op, key, detail in ops:
        trace.record(task, op, key, detail)
    return trace.entries


def _labels(*ops):
    return [(h.task, h.kind.label) for h in reach.classify(_entries(*ops), {"solo": S})]


def _orders(*ops):
    return reach.orders(reach.classify(_entries(*ops), {"solo": S}))


def deliver(task=PRODUCER, consumer="None"):
    return [
        (task, "acquire_lock", LOCK, "acquired"),
        (task, "queue_push", INBOX, "hint"),
        (task, "registry_get", REG, consumer),
        (task, "release_lock", LOCK, ""),
    ]


def turn_tail(task=RUN, found=0):
    ops = [(task, "acquire_lock", LOCK, "acquired"), (task, "queue_drain", INBOX, f"{found} entries")]
    if found:
        ops += [(task, "queue_drain", INBOX, "0 entries"), (task, "queue_push", INBOX, "hint")]
    else:
        ops += [(task, "registry_del", REG, "")]
    return ops + [(task, "release_lock", LOCK, "")]


def test_the_inbox_lock_forbids_a_push_between_a_checks_drain_and_its_put_back():
    kind = reach.BY_LABEL
    check_drain = reach.Kind(reach.CONSUMER, "drain", "a turn-tail check's only", frozenset({reach.INNER}))
    assert not reach.allowed(check_drain, kind["p.push"])
    assert not reach.allowed(kind["p.push"], kind["c.put-back"])
    assert not reach.allowed(kind["c.put-back"], kind["p.push"])
    assert reach.allowed(kind["p.read"], kind["c.lock"])  # the producer hands the lock over
    assert reach.allowed(kind["c.release"], kind["p.lock"])  # the check hands it over
    assert not reach.allowed(kind["p.lock"], kind["c.lock"])  # its push and read come between
    assert reach.allowed(kind["p.push"], kind["c.drain"])  # a reasoning step's drain takes no lock
    assert reach.allowed(kind["d.probe"], kind["c.release"])
    assert len(reach.PAIRS) == 38 and len(reach.ALLOWED) + len(reach.FORBIDDEN) == 76


def test_each_party_and_kind_is_recognised():
    ops = [
        (RUN, "acquire_lock", SESSION_LOCK, "acquired"),
        (RUN, "registry_set", REG, "1"),
        (RUN, "queue_drain", INBOX, "0 entries"),
        *deliver(consumer="1"),
        *turn_tail(found=1),
        *turn_tail(found=0),
        (RUN, "queue_push", WAKEUPS, "wake"),  # a run's own wake-up is no producer's
        *deliver(),
        (PRODUCER, "queue_push", WAKEUPS, "wake"),
        (DISPATCHER, "queue_drain", WAKEUPS, "1 entries"),
        (DISPATCHER, "is_locked", SESSION_LOCK, "False"),
    ]
    assert _labels(*ops) == [
        (RUN, "c.reg-write"), (RUN, "c.drain"),
        (PRODUCER, "p.lock"), (PRODUCER, "p.push"), (PRODUCER, "p.read"),
        (RUN, "c.lock"), (RUN, "c.drain"), (RUN, "c.drain"), (RUN, "c.put-back"), (RUN, "c.release"),
        (RUN, "c.lock"), (RUN, "c.drain"), (RUN, "c.reg-write"), (RUN, "c.release"),
        (PRODUCER, "p.lock"), (PRODUCER, "p.push"), (PRODUCER, "p.read"), (PRODUCER, "p.wake"),
        (DISPATCHER, "d.pop"), (DISPATCHER, "d.probe"),
    ]


def test_a_wake_up_is_a_producers_only_after_it_read_no_consumer():
    assert ("other", "p.wake") not in _labels(*deliver("other", consumer="1"), ("other", "queue_push", WAKEUPS, "wake"))
    assert (PRODUCER, "p.wake") in _labels(*deliver(), (PRODUCER, "queue_push", WAKEUPS, "wake"))


def test_a_check_by_a_task_that_is_no_run_of_the_session_is_no_partys():
    """A fix's sweeper drains and puts back as a check does: neither
    producer nor consumer."""
    assert _labels(*turn_tail("wakeup-sweeper", found=1)) == []
    assert [k for _, k in _labels(*turn_tail("abandon_inbox_consumer", found=1))][0] == "c.lock"


def test_a_pop_belongs_to_the_sessions_its_batch_probes():
    ops = [
        (DISPATCHER, "queue_drain", WAKEUPS, "2 entries"),
        (DISPATCHER, "is_locked", SESSION_LOCK, "True"),
        (DISPATCHER, "is_locked", f"agentscope:session:lock:{T}", "False"),
        (DISPATCHER, "is_locked", SESSION_LOCK, "True"),  # past the batch: a route's look, not a probe
    ]
    handoffs = reach.classify(_entries(*ops), {})
    assert [(h.session, h.kind.label) for h in handoffs] == [
        (S, "d.pop"), (T, "d.pop"), (S, "d.probe"), (T, "d.probe"),
    ]
    assert _labels((DISPATCHER, "queue_drain", WAKEUPS, "0 entries"), (DISPATCHER, "is_locked", SESSION_LOCK, "False")) == []


def test_an_order_counts_between_two_parties_consecutive_or_interleaved():
    # The lock handed over both ways, and a reasoning step's drain inside a delivery.
    assert _orders(*deliver(consumer="1"), *turn_tail(found=1)) == {"p.read→c.lock"}
    assert {"c.release→p.lock"} <= _orders(*turn_tail(), *deliver())
    inside = [*deliver(consumer="1")[:2], (RUN, "queue_drain", INBOX, "1 entries"), *deliver(consumer="1")[2:]]
    assert _orders((RUN, "registry_set", REG, "1"), *inside) >= {"p.push→c.drain", "c.drain→p.read"}


def test_no_order_within_one_task_one_party_or_far_apart():
    # A run delivering to another session's inbox: its own ops here are the consumer's only.
    assert _orders(*turn_tail(), *turn_tail()) == set()
    assert _orders(*deliver(), *deliver("» team member delivers to solo")) == set()
    # The producer's read and a pop long after, a run's check between: nothing raced.
    far = _orders(*deliver(consumer="1"), *turn_tail(found=1), (DISPATCHER, "queue_drain", WAKEUPS, "1 entries"),
                  (DISPATCHER, "is_locked", SESSION_LOCK, "True"))
    assert "p.read→d.pop" not in far and "c.release→d.pop" in far


def test_the_verdict_line_names_unreached_orders_and_orders_the_lock_forbids():
    every = {o: 1 for o in reach.ALLOWED}
    assert reach.line(every) == f"pairs: all {len(reach.ALLOWED)} orders the protocol allows reached"
    one_way = {**every, "c.drain→p.push": 0}
    assert reach.unreached(one_way) == ["c.drain→p.push"]
    neither = {**every, "p.push→c.drain": 0, "c.drain→p.push": 0}
    assert reach.unreached(neither) == ["p.push⇄c.drain"]
    assert reach.line(neither).startswith(f"unreached pairs ({len(reach.ALLOWED) - 2} of {len(reach.ALLOWED)}")
    lost = reach.counts(Counter({"p.push→c.put-back": 1}))
    assert "seen though the inbox lock forbids them: p.push→c.put-back" in reach.line(lost)


def test_each_verdict_prints_its_unreached_pairs():
    entry = {"verdict": "holds", "title": "t", "counterexample": None, "windows": {}, "also_found": {},
             "pairs": {**{o: 2 for o in reach.ALLOWED}, "p.wake→d.pop": 0}}
    lines = verdicts.summary_lines({"I5": entry})
    assert lines[1].strip() == f"unreached pairs ({len(reach.ALLOWED) - 1} of {len(reach.ALLOWED)} orders reached): p.wake→d.pop"


def test_a_played_story_reaches_a_known_pair():
    """A delivery to an idle session wakes it, and the dispatcher pops the
    wake-up: ``p.wake→d.pop``; the run it starts then drains what was
    delivered."""
    with playing(enforcing=["I5"], cast=["leader", "solo"]) as story:
        story.payload_arrives(source="channel", to="solo")
        story.everything_settles()
    played = reach.story_orders(story.world.interleaver.trace.entries, dict(story.world.sessions))
    assert {"p.wake→d.pop"} <= played
    assert not played & set(reach.FORBIDDEN)


def _played(story) -> set[str]:
    return reach.story_orders(story.world.interleaver.trace.entries, dict(story.world.sessions))


def test_a_step_by_step_delivery_lets_a_run_drain_inside_the_producers_section():
    """A run whose turn-tail check found a payload goes round again; a
    delivery's lock and push land before its reasoning step drains, and
    its registry read after: ``p.push→c.drain`` and ``c.drain→p.read``, the
    orders beside the forbidden ``p.push→c.put-back``, which a delivery run
    in one step never plays."""
    with playing(enforcing=["I5"], stepwise_deliveries=True, cast=["leader", "solo"]) as story:
        story.user_sends_message(session="solo", model_turn="answers")
        story.payload_arrives(source="channel", to="solo")
        story.payload_arrives_step_by_step(
            source="channel", to="solo",
            # The check (lock, drain, drain, put-back, release); the new
            # delivery's lock and push; the run's reasoning drain; the read.
            moves=["run"] * 5 + ["delivery", "delivery", "run", "delivery", "delivery"],
        )
        story.everything_settles()
    played = _played(story)
    assert {"p.push→c.drain", "c.drain→p.read", "c.release→p.lock"} <= played
    assert not played & set(reach.FORBIDDEN)


def test_a_second_step_by_step_delivery_meets_the_dispatcher_its_first_woke():
    """The first delivery's wake-up is popped and probed between the
    second one's lock, push and read."""
    with playing(enforcing=["I5"], stepwise_deliveries=True, cast=["leader", "solo"]) as story:
        story.payload_arrives_step_by_step(
            source="channel", to="solo",
            moves=["delivery"] * 6 + ["new delivery", "delivery", "dispatcher", "delivery", "dispatcher", "delivery"],
        )
        story.everything_settles()
    played = _played(story)
    assert {"p.lock→d.pop", "d.pop→p.push", "p.push→d.probe", "d.probe→p.read"} <= played
    assert not played & set(reach.FORBIDDEN)

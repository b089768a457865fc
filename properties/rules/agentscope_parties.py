"""agentscope's own parties, and time: runs going on, the wake-up
dispatcher draining its queue, any one task taking a step (the
fine-grained interleaving choice), virtual time passing, everything
settling."""
from __future__ import annotations

from hypothesis import strategies as st

from .story_rule import Movable, OnNode, Where, story_rule
from .vocabulary import DURATIONS, SPAWNED_TAKE_A_TURN, on


class AgentscopeRules:
    """Runs, the dispatcher, the interleaving and the clock."""

    @story_rule(
        when=lambda self: self.any_run(),
        session=Where("has_run"),
        says=lambda session: f"{session}'s run goes on to its next turn tail.",
    )
    def run_reaches_turn_tail(self, session: str) -> None:
        """The session's run goes on until its next turn ends and it is
        about to check its inbox (the turn tail; before 2.0.7, about to
        release the session), and stops there."""
        self.world.run_takes_turn(session)

    @story_rule(
        when=lambda self: self.any_run(),
        session=Where("has_run"),
        says=lambda session: f"{session}'s run goes on until it ends or must wait.",
    )
    def run_continues(self, session: str) -> None:
        """The session's run goes on until it ends or must wait."""
        self.world.finish_run(session)

    @story_rule(
        when=lambda self: bool(self.world.waiting_dispatchers()),
        node=OnNode("waiting_dispatchers"),
        says=lambda node=None: (
            f"The wake-up dispatcher{on(node)} drains its trigger queue {SPAWNED_TAKE_A_TURN}."
        ),
    )
    def dispatcher_processes_queue(self, node: int | None = None) -> None:
        """The wake-up dispatcher drains its trigger queue: it spawns runs
        (each takes its turn and stops at its turn tail), drops wake-ups of
        parked sessions, re-queues triggers of busy ones after a backoff."""
        with self.world.spawned_runs_take_their_turn(mid_answer=self.streaming):
            self.world.finish_dispatcher(node or 0)

    @story_rule(
        when=lambda self: bool(self.world.movable_tasks()),
        task=Movable(),
        says=lambda task: f"Task `{task}` takes one step (up to its next bus operation).",
    )
    def one_task_takes_a_step(self, task: str) -> None:
        """The interleaving choice: any task that can move takes one bus
        operation's worth of steps."""
        self.world.step_task(task)

    @story_rule(
        when=lambda self: self.world.has_timer(),
        seconds=st.sampled_from(DURATIONS),
        says=lambda seconds: f"{seconds:g} virtual seconds pass.",
    )
    def time_passes(self, seconds: float) -> None:
        """Virtual time passes: backoff retries fire, leases may expire."""
        self.world.pass_time(seconds)

    @story_rule(says=lambda: "Everything runs to its end, with virtual time passing as needed.")
    def everything_settles(self) -> None:
        """Every task runs to its end, with time passing as needed."""
        self.settle()

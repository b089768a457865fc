"""Background jobs: a long tool call the model started ends. Past 10
virtual seconds agentscope's own ``ToolOffloadMiddleware`` has moved it to
the background, and its deliverer queues the result in the inbox."""
from __future__ import annotations

from .story_rule import Where, story_rule


class BackgroundJobs:
    """A background job finishes (machines with ``background_jobs``)."""

    @story_rule(
        when=lambda self: any(map(self.has_running_job, self.cast)),
        session=Where("has_running_job"),
        says=lambda session: (
            f"{session}'s oldest running background job finishes (if agentscope moved it "
            "to the background, its deliverer queues the result in the inbox and wakes the "
            "session)."
        ),
    )
    def background_job_finishes(self, session: str) -> None:
        """The oldest running background job of the session finishes. If
        agentscope has moved it to the background by then, its deliverer
        (a task of its own) queues the result in the session's inbox and wakes
        the session; otherwise the result goes straight to the waiting run."""
        note = self.world.oldest_running_job(session)
        self.ledger.job_finished(session, note)
        self.world.finish_job(note)

"""Back off a trigger's re-queue while its session lock stays held (F17).

The bug (every release 2.0.7–2.0.11; ``_wakeup_dispatcher.py`` is
byte-identical across them): a trigger that finds its session's lock held
is re-queued after ``_RESUME_RETRY_BACKOFF_SECS`` (0.1 s), every time, for
as long as the lock is held. The module says that delay is "long enough to
avoid a hot re-enqueue loop while the lock is held", which holds for a
run finishing its turn. A lock that stays held is another matter: a
release that failed, or a run whose process died, holds it until its
lease runs out (``SESSION_RUN_TTL_SECS``, 600 s). Every trigger queued for
that session meanwhile (a wake-up per delivery, the user's answer) is then
re-queued ten times a second, each time publishing the wake-up signal
that makes every process drain the queue: with three triggers and two
processes, about 150 bus operations a second for minutes (I17; upstream
issue #2677).

The fix: the delay grows with how long this process has seen the lock
held. The first retry of a spell still waits 0.1 s (a run finishing its
turn is as quick to follow as before); then half the time the lock has
been seen held, up to 10 s. A spell ends when this process finds the lock
free, or sees it held again after more than 20 s: a later busy spell
starts at 0.1 s again. A lock held for its whole lease so costs each
trigger about seventy re-queues instead of six thousand.

Upstream: pull request #2682 ("fix(app): bound wakeup retries while a
session lock is held", fixes #2677) also bounds these retries. It
coalesces them to one timer per ``(kind, session_id)``, backs off
exponentially with jitter, and drops a trigger past a 60 s deadline
carried on the entry. This fix differs: it drops nothing (a lock held by
a dead run's lease outlasts 60 s, and a dropped wake-up or answer would
strand what it carried: I11), it keeps the spell in the process rather than on
the entry (so the queue's entries are unchanged), and it coalesces
nothing. The two compose.

Cost on the normal path: none (no bus operation; one dict entry per
session whose lock a trigger found held, dropped when it is found free).
"""
from __future__ import annotations

from .source_patch import SourcePatch

TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")
#: The longest wait between two re-queues, in seconds.
MAX_DELAY = 10.0
_COMMON = dict(
    name="lock-held-backoff",
    module="agentscope.app._manager._wakeup_dispatcher",
    cls="WakeupDispatcher",
    targets=TARGET_RELEASES,
    covers=("I17",),
    what="a trigger re-queued while its session lock stays held backs off, up to 10 s",
)

INIT = """\
        self._task: asyncio.Task | None = None
"""

INIT_SPELLS = """\
        self._task: asyncio.Task | None = None
        # Per session whose lock a trigger found held: when this process
        # first and last saw it held (see ``_lock_held_backoff``).
        self._lock_held: dict[str, tuple[float, float]] = {}
"""

LOCK_HELD_RETRY = """\
                kind,
                input_msg,
            )
            return

        # Orphan guard"""

LOCK_HELD_RETRY_BACKED_OFF = """\
                kind,
                input_msg,
                delay=self._lock_held_backoff(session_id),
            )
            return
        self._lock_held.pop(session_id, None)

        # Orphan guard"""

SIGNATURE = """\
        | None,
    ) -> None:
        \"\"\"Re-enqueue an input-carrying (``resume``/``message``) trigger
        after a short backoff.
"""

SIGNATURE_WITH_DELAY = """\
        | None,
        delay: float = _RESUME_RETRY_BACKOFF_SECS,
    ) -> None:
        \"\"\"Re-enqueue an input-carrying (``resume``/``message``) trigger
        after a short backoff (``delay`` seconds).
"""

SLEEP = "asyncio.sleep(_RESUME_RETRY_BACKOFF_SECS)"
SLEEP_DELAY = "asyncio.sleep(delay)"

DOC_ARGS = """\
            input_msg:
                The parsed input to redeliver.
        \"\"\"
"""

DOC_ARGS_WITH_DELAY = """\
            input_msg:
                The parsed input to redeliver.
            delay (`float`, optional):
                Seconds to wait before re-enqueueing.
        \"\"\"
"""

BACKOFF = f'''
    def _lock_held_backoff(self, session_id: str) -> float:
        """How long a trigger that found ``session_id``'s lock held waits
        before it is re-queued.

        ``_RESUME_RETRY_BACKOFF_SECS`` at first, then half the time this
        process has seen the lock held, up to {MAX_DELAY:g} s: a lock left
        held by a failed release or a dead run (until its lease runs out)
        must not re-queue every trigger ten times a second. A sighting
        more than twice that cap after the last starts a new spell.
        """
        now = asyncio.get_running_loop().time()
        since, last = self._lock_held.get(session_id, (now, now))
        if now - last > 2 * {MAX_DELAY!r}:
            since = now
        self._lock_held[session_id] = (since, now)
        return min(
            max(_RESUME_RETRY_BACKOFF_SECS, (now - since) / 2),
            {MAX_DELAY!r},
        )
'''

RETRY_END = """\
        self._retry_tasks.add(task)
        task.add_done_callback(self._retry_tasks.discard)
"""

PATCHES: tuple[SourcePatch, ...] = (
    SourcePatch(method="__init__", before=INIT, after=INIT_SPELLS, **_COMMON),
    SourcePatch(method="_dispatch_one", before=LOCK_HELD_RETRY, after=LOCK_HELD_RETRY_BACKED_OFF, **_COMMON),
    SourcePatch(
        method="_schedule_retry", before=SIGNATURE, after=SIGNATURE_WITH_DELAY,
        more=((DOC_ARGS, DOC_ARGS_WITH_DELAY), (SLEEP, SLEEP_DELAY), (RETRY_END, RETRY_END + BACKOFF)),
        **_COMMON,
    ),
)

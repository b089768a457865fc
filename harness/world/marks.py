"""The strings agentscope writes that the harness reads: reminder texts,
task names, its logger and its warnings.

The twin of :mod:`.surface` (agentscope's private names): when a release
rewords one of these, this is what changes. Importable without importing
agentscope, so the pytest plugin can load anywhere.
"""
from __future__ import annotations

import re

#: The reminder agentscope pushes into a team leader's inbox about a member.
REMINDER_MARK = "<system-reminder>Team member"
#: Its wording when the member's reply failed.
FAILURE_REMINDER_MARK = "hit an error while running"

#: Task names agentscope gives its independent parties: runs
#: (``chat-run:``, ``wake-run:``, ``resume-run:``), the wake-up dispatcher
#: and its backoff retries, and the cancel dispatcher's three loops
#: (``cancel-dispatcher:session``, ``:task``, ``:interrupt``), the inbox
#: sweeper the reference fix for F5 adds (``wakeup-sweeper``); and, by
#: their coroutine's name (agentscope leaves them unnamed), the deliverer of
#: a background tool's result and the clean-up of its registration, which
#: outlive the run that offloaded the tool.
AGENTSCOPE_ACTOR = re.compile(
    r"(-run:|-retry:|^wakeup-dispatcher(#\d+)?$|^wakeup-sweeper(#\d+)?$|^cancel-dispatcher:"
    r"|^_deliver_when_done(#\d+)?$|^_safe_bg_task_unregister(#\d+)?$)",
)

#: The task name of the wake-up dispatcher's subscription loop.
WAKEUP_DISPATCHER = "wakeup-dispatcher"

#: The task name of the Redis bus' lock heartbeat, before the lock's key.
LOCK_HEARTBEAT = "lock-heartbeat:"

#: A background task's id in its registration key. agentscope draws these
#: from ``shortuuid`` (no id hook reaches them).
BACKGROUND_TASK_ID = re.compile(r"(bg_tasks:[^#\s]+#)([A-Za-z0-9]{22})\b")

#: agentscope's logger.
AGENTSCOPE_LOGGER = "as"

#: Warnings agentscope itself raises that say nothing about the harness
#: (pytest ``filterwarnings`` lines).
AGENTSCOPE_WARNINGS = (
    # agentscope < 2.0.10 leaves a refused run's coroutine unclosed
    "ignore:coroutine 'ChatService.run' was never awaited:RuntimeWarning",
    # ... and so does it with the inbox-sweeper reference fix, which
    # recompiles ``ChatService.run`` (hence its name)
    "ignore:coroutine '_Fixed.run' was never awaited:RuntimeWarning",
    "ignore::DeprecationWarning:agentscope.*",
)

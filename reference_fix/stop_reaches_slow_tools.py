"""Stop a tool that is still in its offload window when its reply is stopped.

The bug (every release 2.0.7–2.0.11): ``ToolOffloadMiddleware.on_acting``
runs each tool call in a task of its own (``_drain_to_queue``) and waits up
to 10 seconds for it before moving it to the background. When the user
stops the reply inside that window, the cancel lands in the middleware's
``wait_for`` and propagates, but the tool's task is neither cancelled nor
registered as a background task: it runs on, unowned, and whatever it
returns reaches nobody (I14). Its effects happen; the agent was told it
was interrupted.

The fix: on cancel, cancel the tool's task too, then let the cancel go on.
"""
from __future__ import annotations

from .source_patch import SourcePatch

UNGUARDED = """\
            try:
                item = await asyncio.wait_for(
                    queue.get(),
                    timeout=remaining,
                )
            except asyncio.TimeoutError:
                break
"""

GUARDED = """\
            try:
                item = await asyncio.wait_for(
                    queue.get(),
                    timeout=remaining,
                )
            except asyncio.TimeoutError:
                break
            except asyncio.CancelledError:
                # The reply is being stopped while the tool still runs in
                # the foreground: stop the tool with it, or it runs on
                # unowned and its result reaches nobody.
                drain_task.cancel()
                raise
"""

PATCH = SourcePatch(
    name="stop-reaches-slow-tools",
    module="agentscope.app.middleware._tool_offload_middleware",
    cls="ToolOffloadMiddleware",
    method="on_acting",
    before=UNGUARDED,
    after=GUARDED,
    targets=("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11"),
    covers=("I14",),
    what="stopping a reply also stops a tool still in its 10-second offload window",
)

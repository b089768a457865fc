"""Publish a stopping reply's events, whatever further stops land.

The bug F11 (every release 2.0.7–2.0.11, on Redis; I9, I10):
``ChatService._run_impl`` publishes each event the agent yields
(``publish_session_event``: an ``XADD`` to the replay log, then a
``PUBLISH``) and re-arms a cancel that lands there (``current.cancel()``),
so it reaches the agent at its next ``__anext__``. Once a stop is on its
way, every later publish of the reply can meet it again. Over Redis a
cancel that cuts a call's reply short makes redis-py close the connection,
so the next call connects again before it writes, and the re-armed cancel
lands there, before anything is sent: the reply's closing events, its
``REPLY_END(interrupted)`` among them, are dropped one by one. The UI's
stream and a channel's gateway never see the reply end (traced on a real
redis-server: ``docs/upstream/F11.md``).

The fix: while the run task is being cancelled (``Task.cancelling()``: a
stop, a delete or a shutdown is on its way), an event's publish runs in a
task of its own, awaited however many cancels land meanwhile, and the
first is re-raised after it: the agent still gets the stop at its next
``__anext__``, and the events it yields meanwhile are all published. On
the normal path nothing changes but one call frame per event; no bus
operation is added.
"""
from __future__ import annotations

from .source_patch import SourcePatch

#: Every release whose ``_run_impl`` has one of the texts below.
TARGET_RELEASES = ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10", "2.0.11")

#: 2.0.7–2.0.9: the publish in each of the two event loops.
PUBLISH = """\
                                try:
                                    await publish_session_event(
                                        self._message_bus,
                                        session_id,
                                        event.model_dump(mode="json"),
                                    )
"""

PUBLISH_THROUGH_STOPS = """\
                                try:
                                    await self._publish_event(
                                        session_id,
                                        event.model_dump(mode="json"),
                                    )
"""

#: 2.0.10 on: the same, keeping the entry id as the checkpoint cursor.
PUBLISH_KEEPING_CURSOR = """\
                                    checkpoint_cursor = (
                                        await publish_session_event(
                                            self._message_bus,
                                            session_id,
                                            event.model_dump(mode="json"),
                                        )
                                    )
"""

PUBLISH_KEEPING_CURSOR_THROUGH_STOPS = """\
                                    checkpoint_cursor = (
                                        await self._publish_event(
                                            session_id,
                                            event.model_dump(mode="json"),
                                        )
                                    )
"""

PROJECT_TAIL = """\
                    type(event).__name__,
                    session_record.id,
                    str(e),
                )
"""

PROJECT_TAIL_AND_HELPER = PROJECT_TAIL + '''
    async def _publish_event(self, session_id: str, event: dict) -> str:
        """Publish one of the agent's events; while the run is being
        cancelled, whatever further cancels land.

        A cancel landing in a publish is re-armed into the agent (see
        ``_run_impl``), so once a stop is on its way it can meet every
        later publish of the reply. Over Redis a cancel cutting a call's
        reply short leaves the connection to be made again before the
        next call writes, and the re-armed cancel lands there: the
        reply's closing events, ``REPLY_END`` among them, would be dropped
        one by one. While the run is being cancelled the publish runs in a
        task of its own, awaited however many cancels land, and the first
        is re-raised after it.

        Args:
            session_id (`str`):
                The session whose events these are.
            event (`dict`):
                The event, as JSON.

        Returns:
            `str`:
                The event's entry id in the session's replay log.
        """
        current = asyncio.current_task()
        if current is None or not current.cancelling():
            return await publish_session_event(
                self._message_bus,
                session_id,
                event,
            )
        publishing = asyncio.ensure_future(
            publish_session_event(self._message_bus, session_id, event),
        )
        cancelled = None
        while not publishing.done():
            try:
                await asyncio.shield(publishing)
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        entry_id = publishing.result()
        if cancelled is not None:
            raise cancelled
        return entry_id
'''

_COMMON = dict(
    name="publish-survives-stops",
    module="agentscope.app._service._chat",
    cls="ChatService",
    covers=("I9", "I10"),
    what="a stopping reply's events are published whatever further stops land",
)


def _loops(before: str, after: str, releases: tuple[str, ...]) -> SourcePatch:
    """The patch of both event loops (the first, then the second
    occurrence of ``before``)."""
    return SourcePatch(
        method="_run_impl",
        before=before,
        after=after,
        more=((before, after),),
        targets=releases,
        **_COMMON,
    )


PATCHES = (
    _loops(PUBLISH, PUBLISH_THROUGH_STOPS, ("2.0.7", "2.0.7.post1", "2.0.8", "2.0.9")),
    _loops(PUBLISH_KEEPING_CURSOR, PUBLISH_KEEPING_CURSOR_THROUGH_STOPS, ("2.0.10", "2.0.11")),
    SourcePatch(
        method="_project_event",
        before=PROJECT_TAIL,
        after=PROJECT_TAIL_AND_HELPER,
        targets=TARGET_RELEASES,
        **_COMMON,
    ),
)

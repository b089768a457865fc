"""The redis-py connection the harness hands agentscope's Redis bus.

A plain ``redis.asyncio.Connection`` that tells its
:class:`~harness.kernel.redis_link.RedisLink` what it sends and reads
(see that module for why), freezes once its process died, and turns a
subscriber's timed poll into one wait for the next message.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio as aioredis

from .redis_expiry import ttls_given
from .tasks import never_again

if TYPE_CHECKING:
    from .redis_link import RedisLink


class LinkedConnection(aioredis.Connection):
    """A redis-py connection that reports to its :class:`RedisLink`."""

    def __init__(self, *, link: "RedisLink", owner: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.link = link
        self.owner = owner
        self.index = link.joined(self)
        self._publishing: deque[str] = deque()
        #: The TTLs (ms) a command awaiting its reply may give, if any.
        self._gives_ttl: frozenset[int] = frozenset()

    async def _freeze_if_dead(self) -> None:
        if self.link.is_frozen(self):
            await never_again()

    async def connect_check_health(self, *args: Any, **kwargs: Any):
        await self._freeze_if_dead()
        return await self.link.round_trip(lambda: super(LinkedConnection, self).connect_check_health(*args, **kwargs))

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        await self._freeze_if_dead()
        self.link.sending(self, args)
        ttls = ttls_given(args)
        if ttls:
            self.link.follow_clock()  # the range its TTL is read in starts here
            self.link.expiry.expect(ttls)  # and the TTL is one of these
            self._gives_ttl = ttls
        if args and str(args[0]).upper() == "PUBLISH":
            self._publishing.append(str(args[1]))
        try:
            await super().send_command(*args, **kwargs)
        except BaseException:
            if ttls:  # never sent: no reply will end its range
                self._gives_ttl = frozenset()
                self.link.expiry.answered(ttls)
            raise

    async def read_response(self, *args: Any, **kwargs: Any):
        await self._freeze_if_dead()
        if kwargs.get("push_request"):
            return await self._read_push(*args, **kwargs)
        answered = False
        try:
            response = await self.link.round_trip(lambda: super(LinkedConnection, self).read_response(*args, **kwargs))
            answered = True
        except redis.ResponseError:
            answered = True
            raise
        finally:
            if self._gives_ttl:  # and ends here: the TTL is taken over
                ttls, self._gives_ttl = self._gives_ttl, frozenset()
                try:
                    self.link.follow_clock()
                finally:
                    # A reply lost (a cancelled wait, a dropped connection)
                    # leaves the command's TTLs expected: the server may
                    # apply it after this call.
                    if answered:
                        self.link.expiry.answered(ttls)
        if self._publishing:
            delivery = self.link.published(self._publishing.popleft(), int(response))
            if delivery is not None:
                await delivery.replied
        return response

    async def _read_push(self, *args: Any, **kwargs: Any):
        """A subscriber's read: a poll with a timeout waits for the next
        message instead (see the module's docstring)."""
        if kwargs.get("timeout"):
            kwargs["timeout"] = None
        self.link.reading(self, True)
        try:
            response = await super().read_response(*args, **kwargs)
        finally:
            self.link.reading(self, False)
        await self._freeze_if_dead()
        await self.link.took(self, response)
        return response

    async def disconnect(self, *args: Any, **kwargs: Any) -> None:
        if self.link.is_frozen(self):
            return
        self.link.closed(self)
        await self.link.round_trip(lambda: super(LinkedConnection, self).disconnect(*args, **kwargs))

    def abort(self) -> None:
        """Close the socket now, as the OS does for a dead process."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.transport.abort()


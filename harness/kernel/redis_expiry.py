"""Expiry on virtual time, on a real redis-server whose clock is the wall's.

Redis' clock cannot be mocked, and a machine under load can let any amount
of wall time pass between two commands, so no key is left to expire on the
server's clock. Each TTL agentscope gives is taken over at once: the server
keeps the key for :data:`HELD` milliseconds (it never ends it), and the
harness records the key's deadline in virtual time in a hash on the server
(:data:`DEADLINES`) and deletes the key when virtual time reaches it.

Which TTL agentscope gave is read off the command itself: the connection
notes, as it sends a command that can give one, the TTLs its arguments
name (:func:`ttls_given`: exactly one for ``SET ... EX``, ``EXPIRE`` and
the like; each whole number for a script, which may pass one on). The
server's clock only narrows that list: a key's ``PTTL`` is its TTL less
the wall time since the command ran, and the command ran after the
previous call of the script (the server time of which is kept at
:data:`SYNCED_AT`), so the TTL lies between ``PTTL`` and ``PTTL`` plus the
time since that call. The TTL is the one noted TTL in that range; when the
range holds none or two, the script fails rather than guess. A command
naming one TTL therefore never depends on the wall clock, however long a
loaded machine stalls the server or the process between the link's calls
(reading the TTL off the wall time alone failed runs whenever a second or
more of it passed between the calls just before and just after the
command: a story then took another path).
"""
from __future__ import annotations

import redis

#: Where the harness keeps each key's deadline, in virtual milliseconds
#: (no TTL, so the script never takes it over; agentscope never reads it).
DEADLINES = "hitl-harness:deadlines"

#: The server time (ms) of the script's last call.
SYNCED_AT = "hitl-harness:synced-at"

#: The TTL (ms) a taken-over key keeps on the server: 31 years. A TTL
#: under half of it is one agentscope gave since the last call.
HELD = 10**12

#: How far (ms) the server's clock for keys may lag the ``TIME`` it
#: reports: it keeps one reading per turn of its event loop, so a TTL given
#: in the same millisecond as a call can seem to have run a millisecond
#: longer than the call is old (a story failed on that).
CLOCK_LAG = 1000

#: KEYS: DEADLINES, SYNCED_AT. ARGV: virtual ms before and after the time
#: that passes (equal when none does), :data:`HELD`, :data:`CLOCK_LAG`,
#: then the TTLs (ms) the commands since the last call may have given. Atomic: nothing runs
#: on the server in between. Returns how many keys ended.
VIRTUAL_EXPIRY_LUA = """
local deadlines, synced_at = KEYS[1], KEYS[2]
local before, after, held, lag = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = now - tonumber(redis.call('GET', synced_at) or now) + 1
redis.call('SET', synced_at, now)
for _, key in ipairs(redis.call('KEYS', '*')) do
  local left = redis.call('PTTL', key)
  if left > 0 and left < held / 2 then
    local ttl = nil
    for i = 5, #ARGV do
      local given = tonumber(ARGV[i])
      if given >= left and given <= left + since + lag then
        if ttl ~= nil and ttl ~= given then
          return redis.error_reply('TTL of ' .. key .. ' unknown: ' .. left .. ' ms left, ' .. since ..
            ' ms after the last sync: ' .. ttl .. ' and ' .. given .. ' ms were both given')
        end
        ttl = given
      end
    end
    if ttl == nil then
      return redis.error_reply('TTL of ' .. key .. ' unknown: ' .. left .. ' ms left, ' .. since ..
        ' ms after the last sync, and no TTL given since then between')
    end
    redis.call('HSET', deadlines, key, before + ttl)
    redis.call('PEXPIRE', key, held)
  end
end
local ended = 0
local known = redis.call('HGETALL', deadlines)
for i = 1, #known, 2 do
  local key, deadline = known[i], tonumber(known[i + 1])
  if redis.call('PTTL', key) < held / 2 then
    redis.call('HDEL', deadlines, key)  -- gone, or its TTL taken away
  elseif deadline <= after then
    redis.call('DEL', key)
    redis.call('HDEL', deadlines, key)
    ended = ended + 1
  end
end
return ended
"""


class ExpiryOutOfReach(AssertionError):
    """The server cannot tell which TTL agentscope gave a key (no TTL the
    commands named fits, or two do): going on would end the key at a
    guessed time."""


#: Commands whose TTL argument follows the key, and its unit in ms.
_TTL_AFTER_KEY = {"EXPIRE": 1000, "PEXPIRE": 1, "SETEX": 1000, "PSETEX": 1}

#: ``SET`` options that name a TTL, and its unit in ms.
_SET_TTL_OPTIONS = {"EX": 1000, "PX": 1}


def _whole(arg) -> int | None:
    """``arg`` as a positive whole number, or ``None``."""
    text = arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
    return int(text) if text.isdigit() and int(text) > 0 else None


def ttls_given(args: tuple) -> frozenset[int]:
    """The TTLs (ms) the command ``args`` may give a key: the one its
    arguments name (``SET ... EX n``, ``EXPIRE key n``, ...), or, for a
    script, each whole number among them, in seconds and in milliseconds
    (agentscope's compare-and-set script passes its ``EXPIRE``'s seconds).
    Empty for a command that gives none."""
    name = str(args[0]).upper() if args else ""
    if name in _TTL_AFTER_KEY and len(args) > 2:
        ttl = _whole(args[2])
        return frozenset() if ttl is None else frozenset({ttl * _TTL_AFTER_KEY[name]})
    if name == "SET":
        options = [str(a).upper() for a in args[3:]]
        for option, unit in _SET_TTL_OPTIONS.items():
            if option in options and 3 + options.index(option) + 1 < len(args):
                ttl = _whole(args[3 + options.index(option) + 1])
                return frozenset() if ttl is None else frozenset({ttl * unit})
        return frozenset()
    if name in ("EVAL", "EVALSHA"):
        numbers = {_whole(a) for a in args[2:]} - {None}
        return frozenset({n * 1000 for n in numbers} | numbers)
    return frozenset()


class VirtualExpiry:
    """The keys' deadlines on one server, in virtual milliseconds."""

    def __init__(self, client: redis.Redis) -> None:
        self._script = client.register_script(VIRTUAL_EXPIRY_LUA)
        self._seconds = 0.0  # summed as the clock sums them, rounded once
        self.now_ms = 0
        #: The TTLs each command sent and not yet followed may give (ms).
        self._given: list[frozenset[int]] = []

    def expect(self, ttls: frozenset[int]) -> None:
        """A command about to be sent may give one of ``ttls`` (ms): until
        :meth:`answered`, every call takes such a TTL over as that one (a
        call another connection makes while the command is on its way may
        be the one that finds its key)."""
        self._given.append(ttls)

    def answered(self, ttls: frozenset[int]) -> None:
        """The command that may give one of ``ttls`` was answered, and
        a call after its answer took its TTL over."""
        self._given.remove(ttls)

    def follow(self, seconds: float = 0.0) -> int:
        """Take over the TTLs given since the last call, then let
        ``seconds`` of virtual time pass: keys whose deadline it reaches
        end. Returns how many ended."""
        before = self.now_ms
        self._seconds += seconds
        self.now_ms = round(self._seconds * 1000)
        given = sorted(frozenset().union(*self._given))
        try:
            return self._script(keys=[DEADLINES, SYNCED_AT], args=[before, self.now_ms, HELD, CLOCK_LAG, *given])
        except redis.ResponseError as error:
            raise ExpiryOutOfReach(str(error)) from error

"""Expiry on virtual time, on a real redis-server whose clock is the wall's.

Redis' clock cannot be mocked, and a machine under load can let any amount
of wall time pass between two commands, so no key is left to expire on the
server's clock. Each TTL agentscope gives is taken over at once: the server
keeps the key for :data:`HELD` milliseconds (it never ends it), and the
harness records the key's deadline in virtual time in a hash on the server
(:data:`DEADLINES`) and deletes the key when virtual time reaches it.

The one thing read off the server's clock is which TTL agentscope gave: a
key's ``PTTL`` is that TTL less the wall time since the command ran, and
the command ran after the previous call of the script (the server time of
which is kept at :data:`SYNCED_AT`). agentscope gives TTLs in whole seconds
(``EXPIRE``, ``SET ... EX``), so the TTL is the one whole second in that
range; when the range holds none or two, the script fails rather than
guess. The link calls it just before and just after each command that can
give a TTL, so the range is one round trip wide.
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

#: KEYS: DEADLINES, SYNCED_AT. ARGV: virtual ms before and after the time
#: that passes (equal when none does). Atomic: nothing runs on the server
#: in between. Returns how many keys ended.
VIRTUAL_EXPIRY_LUA = """
local deadlines, synced_at = KEYS[1], KEYS[2]
local before, after, held = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = now - tonumber(redis.call('GET', synced_at) or now) + 1
redis.call('SET', synced_at, now)
for _, key in ipairs(redis.call('KEYS', '*')) do
  local left = redis.call('PTTL', key)
  if left > 0 and left < held / 2 then
    local ttl = math.ceil(left / 1000) * 1000
    if ttl > left + since or ttl + 1000 <= left + since then
      return redis.error_reply('TTL of ' .. key .. ' unknown: ' .. left .. ' ms left, ' .. since ..
        ' ms after the last sync, and no single whole second between')
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
    """The server cannot tell which TTL agentscope gave a key (the wall
    time around the command was a second or more, or the TTL was not whole
    seconds): going on would end the key at a guessed time."""


class VirtualExpiry:
    """The keys' deadlines on one server, in virtual milliseconds."""

    def __init__(self, client: redis.Redis) -> None:
        self._script = client.register_script(VIRTUAL_EXPIRY_LUA)
        self._seconds = 0.0  # summed as the clock sums them, rounded once
        self.now_ms = 0

    def follow(self, seconds: float = 0.0) -> int:
        """Take over the TTLs given since the last call, then let
        ``seconds`` of virtual time pass: keys whose deadline it reaches
        end. Returns how many ended."""
        before = self.now_ms
        self._seconds += seconds
        self.now_ms = round(self._seconds * 1000)
        try:
            return self._script(keys=[DEADLINES, SYNCED_AT], args=[before, self.now_ms, HELD])
        except redis.ResponseError as error:
            raise ExpiryOutOfReach(str(error)) from error

-- admit.lua: give back an agent's slot on each scope (or the slot held for it as a
-- woken waiter), then admit waiters, lowest turn first (turns.lua), to every slot
-- free on the scope: each is held for its waiter until its wake lease lapses.
-- KEYS[1..m]       the scopes' rows (their running_limit, if any)
-- KEYS[m+1..2m]    the scopes' running sets (member -> lease expiry), in the same order
-- KEYS[2m+1..3m]   the scopes' waiting sets (member -> its turn), same order
-- KEYS[3m+1..4m]   the scopes' holders, same order
-- KEYS[4m+1..5m]   the scopes' woken sets (member -> when the slot held for it lapses), same order
-- KEYS[5m+1..6m]   the scopes' turns, same order
-- ARGV[1]          the member giving back: JSON [job id, agent id]; '' to admit only
-- ARGV[2]          now (unix seconds)
-- ARGV[3]          when a slot held for a waiter admitted now lapses (unix seconds)
-- ARGV[4]          a woken set's TTL in seconds (the wake lease's span)
-- ARGV[5]          a waiting set's TTL in seconds
-- ARGV[6..5+m]     the scope names, in KEYS order
-- Returns (replies: covey.redis_scripts.Reply) {OK, name, member, name, member, ...}:
-- each waiter admitted and the scope it was admitted to, for the caller to wake. A
-- scope whose cap was removed admits one waiter a call, so its queue still drains.

local m = #KEYS / 6
local member, now = ARGV[1], ARGV[2]
local woke = {OK}
for i = 1, m do
  local running, waiting, woken = KEYS[m + i], KEYS[2 * m + i], KEYS[4 * m + i]
  if member ~= '' then
    redis.call('ZREM', running, member)
    redis.call('HDEL', KEYS[3 * m + i], member)
    redis.call('ZREM', woken, member)
  end
  redis.call('ZREMRANGEBYSCORE', running, '-inf', '(' .. now)
  redis.call('ZREMRANGEBYSCORE', woken, '-inf', '(' .. now)
  local limit = tonumber(redis.call('HGET', KEYS[i], 'running_limit'))
  local free = limit and limit - redis.call('ZCARD', running) - redis.call('ZCARD', woken) or 1
  local popped = free > 0 and redis.call('ZPOPMIN', waiting, free) or {}
  for j = 1, #popped, 2 do
    redis.call('ZADD', woken, ARGV[3], popped[j])
    table.insert(woke, ARGV[5 + i])
    table.insert(woke, popped[j])
  end
  if #popped > 0 then
    redis.call('EXPIRE', woken, ARGV[4])
    admitted(KEYS[5 * m + i], tonumber(popped[#popped]), ARGV[5])
  end
end
return woke

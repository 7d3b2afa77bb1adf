-- running.lua: take a running slot for an agent on every scope of its that caps the
-- agents running at once, or take none and join the queue of the scope that is full.
-- KEYS[1..m]       the scopes' rows (their running_limit, if any)
-- KEYS[m+1..2m]    the scopes' running sets (member -> lease expiry), in the same order
-- KEYS[2m+1..3m]   the scopes' waiting sets (member -> when it first waited), in the same order
-- ARGV[1]          the agent's member: JSON [job id, agent id]
-- ARGV[2]          now (unix seconds)
-- ARGV[3]          the lease's expiry (unix seconds)
-- ARGV[4]          a running set's TTL in seconds (the lease's span)
-- ARGV[5]          a waiting set's TTL in seconds
-- ARGV[6..5+m]     the scope names, in KEYS order
-- Returns {1, name...}: held on the capped scopes named (a slot it held already has
-- its lease renewed: a redelivered step does not count twice), and no longer
-- waiting on them; {0, name, running, limit} when a scope is at its cap: nothing
-- is taken, and the agent waits in that scope's queue, keeping its place if it
-- was there already (the step that gives a slot back wakes the first in it).
-- A member whose lease lapsed (its worker died, its renewals stopped) is dropped
-- before counting, so a crashed holder frees its slot within one lease.

local m = #KEYS / 3
local capped, names = {}, {}
for i = 1, m do
  local limit = tonumber(redis.call('HGET', KEYS[i], 'running_limit'))
  if limit then
    local set = KEYS[m + i]
    redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARGV[2])
    if not redis.call('ZSCORE', set, ARGV[1]) then
      local running = redis.call('ZCARD', set)
      if running >= limit then
        redis.call('ZADD', KEYS[2 * m + i], 'NX', ARGV[2], ARGV[1])
        redis.call('EXPIRE', KEYS[2 * m + i], ARGV[5])
        return {0, ARGV[5 + i], running, limit}
      end
    end
    table.insert(capped, i)
    table.insert(names, ARGV[5 + i])
  end
end
for _, i in ipairs(capped) do
  redis.call('ZADD', KEYS[m + i], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[m + i], ARGV[4])
  redis.call('ZREM', KEYS[2 * m + i], ARGV[1])
end
return {1, unpack(names)}

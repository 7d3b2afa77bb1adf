-- running.lua: take a running slot for an agent on every scope of its that caps the
-- agents running at once, or take none and join the queue of the scope that is full.
-- KEYS[1..m]       the scopes' rows (their running_limit, if any)
-- KEYS[m+1..2m]    the scopes' running sets (member -> lease expiry), in the same order
-- KEYS[2m+1..3m]   the scopes' waiting sets (member -> when it first waited), in the same order
-- KEYS[3m+1..4m]   the scopes' holders (member -> the run of its step that holds its slot), same order
-- KEYS[4m+1]       the job's expected messages (agent id -> message JSON)
-- ARGV[1]          the agent's member: JSON [job id, agent id]
-- ARGV[2]          now (unix seconds)
-- ARGV[3]          the lease's expiry (unix seconds)
-- ARGV[4]          a running set's TTL in seconds (the lease's span)
-- ARGV[5]          a waiting set's TTL in seconds
-- ARGV[6]          the run of the step taking the slot (a token of its task's run); ''
--                  for a run that takes over a slot whoever held it
-- ARGV[7]          the agent id
-- ARGV[8]          the expected message this run took up, as stored; '' for a step
--                  taken up from none (a root's first step)
-- ARGV[9..8+m]     the scope names, in KEYS order
-- Returns (replies: covey.redis_scripts.Reply) {OK, name...}: held on the capped
-- scopes named (a slot the same run held already has its lease renewed), and no
-- longer waiting on them; {REFUSED, name, running, limit} when a scope is at its cap:
-- nothing is taken, and the agent waits in that scope's queue, keeping its place if
-- it was there already (the step that gives a slot back wakes the first in it);
-- {ELSEWHERE, name} when another run of the agent's step holds its slot and its lease
-- is live: a duplicate of a step that is running (a copy of its message), which must
-- not run beside it; {MOVED_ON} when the message taken up is no longer the agent's
-- expected one: another copy of it ran the step meanwhile (and gave its slot back),
-- and this one must not run it again.
-- A member whose lease lapsed (its worker died, its renewals stopped) is dropped
-- before counting, so a crashed holder frees its slot within one lease.

local m = (#KEYS - 1) / 4
if ARGV[8] ~= '' and redis.call('HGET', KEYS[4 * m + 1], ARGV[7]) ~= ARGV[8] then return {MOVED_ON} end
local capped, names = {}, {}
for i = 1, m do
  local limit = tonumber(redis.call('HGET', KEYS[i], 'running_limit'))
  if limit then
    local set = KEYS[m + i]
    redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARGV[2])
    if redis.call('ZSCORE', set, ARGV[1]) then
      if ARGV[6] ~= '' and redis.call('HGET', KEYS[3 * m + i], ARGV[1]) ~= ARGV[6] then return {ELSEWHERE, ARGV[8 + i]} end
    else
      local running = redis.call('ZCARD', set)
      if running >= limit then
        redis.call('ZADD', KEYS[2 * m + i], 'NX', ARGV[2], ARGV[1])
        redis.call('EXPIRE', KEYS[2 * m + i], ARGV[5])
        return {REFUSED, ARGV[8 + i], running, limit}
      end
    end
    table.insert(capped, i)
    table.insert(names, ARGV[8 + i])
  end
end
for _, i in ipairs(capped) do
  redis.call('ZADD', KEYS[m + i], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[m + i], ARGV[4])
  redis.call('ZREM', KEYS[2 * m + i], ARGV[1])
  redis.call('HSET', KEYS[3 * m + i], ARGV[1], ARGV[6])
  redis.call('EXPIRE', KEYS[3 * m + i], ARGV[4])
end
return {OK, unpack(names)}

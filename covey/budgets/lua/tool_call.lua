-- tool_call.lua: count one tool call on every agent of a chain, once, or refuse it past a cap.
-- KEYS[1]        the job's calls (id -> 'tool' once this call is counted)
-- KEYS[2..n+1]   the agent rows, root first
-- KEYS[n+2]      the agent's replies hash (id -> the finished call's result)
-- ARGV[1]        the call's id
-- ARGV[2]        the job's TTL in seconds
-- ARGV[3..]      the agent ids, in KEYS order (for messages)
-- then the event of the call's start (events.lua), written when it is counted
-- Returns (replies: covey.redis_scripts.Reply) {OK, found, record}: counted, now or
-- by an earlier run of the same step; found is 1 and record the result when that run
-- stored one (0 and '': the call never finished).
-- {REFUSED, reason, id} refused: the agent whose tool_calls_limit is reached (nearest first).
-- {MISSING, reason} when an agent row is missing: nothing is written.
-- Counting is idempotent by id, so a redelivered step is not charged a call twice.

local rid = ARGV[1]
if redis.call('HEXISTS', KEYS[1], rid) == 1 then
  local record = redis.call('HGET', KEYS[NKEYS], rid)
  if record then return {OK, 1, record} end
  return {OK, 0, ''}
end
local n = NKEYS - 2
for i = n, 1, -1 do
  local r = redis.call('HMGET', KEYS[1 + i], 'depth', 'tool_calls_limit', 'tool_calls_used')
  if not r[1] then return {MISSING, 'the ledger row of agent ' .. ARGV[2 + i] .. ' is missing'} end
  if r[2] and (tonumber(r[3]) or 0) + 1 > tonumber(r[2]) then
    return {REFUSED, 'tool call cap reached: max_tool_calls=' .. r[2] .. ' at agent ' .. ARGV[2 + i], ARGV[2 + i]}
  end
end
for i = 1, n do redis.call('HINCRBY', KEYS[1 + i], 'tool_calls_used', 1) end
redis.call('HSET', KEYS[1], rid, 'tool')
redis.call('EXPIRE', KEYS[1], ARGV[2])
emit(1)
return {OK, 0, ''}

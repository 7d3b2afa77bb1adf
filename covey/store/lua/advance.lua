-- advance.lua: save an agent's state at a step together with the messages that step
-- sends (its outbox) and its node, unless the step is stale. Put after join.lua,
-- transcript.lua and nodes.lua.
-- KEYS[1]     the agent's checkpoint hash (round = the step, state)
-- KEYS[2]     the job's expected messages (agent id -> message JSON)
-- KEYS[3]     the index of jobs with expected messages (a set of job ids)
-- KEYS[4..8]  the agent's join keys (join.lua)
-- KEYS[9]     the job's nodes hash (agent id -> packed node JSON)
-- KEYS[10]    the job's held messages (agent id -> the message that takes it up again)
-- KEYS[11]    the job's approvals (call id -> the approval's JSON)
-- ARGV[1]  the step
-- ARGV[2]  the state, JSON
-- ARGV[3]  TTL in seconds
-- ARGV[4]  the job id
-- ARGV[5]  the agent id
-- ARGV[6]  the expected message this step took up, as stored; '' for a step taken
--          up from none (a root's first step)
-- ARGV[7]  the agent's next message (a continuation), or '' (it waits, or ends)
-- ARGV[8]  the resume that joins its children, or '' (it does not wait)
-- ARGV[9]  the join: 'all', 'each' or 'now' (join.lua)
-- ARGV[10]  the agent's node as this step leaves it, packed
-- ARGV[11]  the final statuses, each between commas (nodes.lua)
-- ARGV[12]  the tool calls whose approval it waits for, a JSON list ('' = none): its
--           next message (ARGV[7]) is then held, out of the outbox, until a decision
--           on one of them (decide.lua) makes it expected
-- ARGV[13..] child agent id, child message: the children it opened
-- then the agent's transcript entries so far (transcript.lua), then the event of
-- its node's move (events.lua)
-- Returns (replies: covey.redis_scripts.Reply) MOVED_ON if the stored step is newer,
-- or the message taken up is no longer the expected one (a duplicate already went
-- on): nothing written, the caller sends nothing. OK if saved; WOKEN if saved and the
-- resume is due now (children finished while the step ran, or ARGV[9] is 'now'): it
-- is expected, the caller sends it; or, for an agent waiting for approvals, a
-- decision came while the step ran: its next message is expected, the caller sends it.

local stored = redis.call('HGET', KEYS[1], 'round')
if stored and tonumber(stored) > tonumber(ARGV[1]) then return MOVED_ON end
local agent, ttl = ARGV[5], tonumber(ARGV[3])
if ARGV[6] ~= '' and redis.call('HGET', KEYS[2], agent) ~= ARGV[6] then return MOVED_ON end
redis.call('HSET', KEYS[1], 'round', ARGV[1], 'state', ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
local j = join_keys(4)
-- A batch exists only for the resume this step took up: its children are in the state now.
redis.call('DEL', j.batch)
local saved = OK
if ARGV[12] ~= '' then
  local decided = false
  for _, call in ipairs(cjson.decode(ARGV[12])) do
    local approval = redis.call('HGET', KEYS[11], call)
    if approval and cjson.decode(approval).decision then decided = true end
  end
  if decided then
    redis.call('HSET', KEYS[2], agent, ARGV[7])
    saved = WOKEN
  else
    redis.call('HSET', KEYS[10], agent, ARGV[7])
    redis.call('EXPIRE', KEYS[10], ttl)
    redis.call('HDEL', KEYS[2], agent)
  end
elseif ARGV[7] ~= '' then
  redis.call('HSET', KEYS[2], agent, ARGV[7])
else
  redis.call('HDEL', KEYS[2], agent)
end
if ARGV[8] ~= '' and join_wait(j, KEYS[2], agent, ARGV[8], ARGV[9], 13, NARGV, ttl) then saved = WOKEN end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('SADD', KEYS[3], ARGV[4])
  -- The index lives as long as the newest job in it: no key without a TTL, and a
  -- member whose outbox expired is dropped by the reconciler's next pass.
  redis.call('EXPIRE', KEYS[3], ttl)
end
write_node(KEYS[9], agent, ARGV[10], ARGV[11], 1)
redis.call('EXPIRE', KEYS[9], ttl)
append_transcript(ttl)
return saved

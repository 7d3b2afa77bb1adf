-- finish.lua: write an agent's final node once, retire what it kept while running,
-- and count it off its parent's join.
-- KEYS[1]  the job's nodes hash (agent id -> packed node JSON)
-- KEYS[2]  the job's expected messages (agent id -> message JSON)
-- KEYS[3]  the parent's pending children (a set, join "all"; any key for a root)
-- KEYS[4]  the job's joins (waiting agent id -> its resume message JSON)
-- KEYS[5]  the parent's awaited children (a set, join "each"; any key for a root)
-- KEYS[6]  the parent's children done while it ran (a set)
-- KEYS[7]  the children the parent's expected resume hands it (a set)
-- KEYS[8]  with ARGV[6] = 1: the agent's ledger row, which must be there
-- KEYS[8 + ARGV[6]..] keys the agent's end makes obsolete (its checkpoint, stored replies)
-- ARGV[1]  the agent id
-- ARGV[2]  its final node, packed
-- ARGV[3]  TTL in seconds, set on the nodes hash and the parent's sets
-- ARGV[4]  the parent's agent id, or '' for a root
-- ARGV[5]  the final statuses, each between commas (",completed,failed,")
-- ARGV[6]  1 if KEYS[8] is the agent's ledger row, else 0
-- then the agent's last transcript entries (transcript.lua)
-- Returns {0} if the node was already final (nothing written); {-1} if the ledger
-- row it was given is gone (nothing written: the job's records went with it); {1} if written;
-- {1, resume} if the parent's resume is now due: this was the last child of a join
-- "all", or a child of a join "each" whose parent is idle (the child is its batch).
-- ``resume`` (now the parent's expected message) is the caller's to send.

local guarded = tonumber(ARGV[6])
if guarded == 1 and redis.call('EXISTS', KEYS[8]) == 0 then return {-1} end
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing and string.find(ARGV[5], ',' .. cjson.decode(existing)['s'] .. ',', 1, true) then return {0} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 8 + guarded, NKEYS do redis.call('DEL', KEYS[i]) end
append_transcript(ARGV[3])
local parent = ARGV[4]
if parent == '' then return {1} end
if redis.call('SREM', KEYS[3], ARGV[1]) == 1 then
  if redis.call('SCARD', KEYS[3]) > 0 then return {1} end
elseif redis.call('SREM', KEYS[5], ARGV[1]) == 1 then
  -- Idle (its resume is parked in the joins): this child wakes it. Running (the
  -- resume is out, or it has not waited yet): its next wait takes this child up.
  local into = KEYS[6]
  if redis.call('HEXISTS', KEYS[4], parent) == 1 then into = KEYS[7] end
  redis.call('SADD', into, ARGV[1])
  redis.call('EXPIRE', into, ARGV[3])
  if into == KEYS[6] then return {1} end
else
  return {1}
end
local resume = redis.call('HGET', KEYS[4], parent)
if resume then
  redis.call('HSET', KEYS[2], parent, resume)
  redis.call('HDEL', KEYS[4], parent)
  return {1, resume}
end
return {1}

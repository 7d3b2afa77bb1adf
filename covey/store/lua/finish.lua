-- finish.lua: write an agent's final node once, retire what it kept while running,
-- and count it off its parent's join.
-- KEYS[1]  the job's nodes hash (agent id -> packed node JSON)
-- KEYS[2]  the job's expected messages (agent id -> message JSON)
-- KEYS[3]  the parent's pending children (a set; any key for a root)
-- KEYS[4]  the job's joins (waiting agent id -> its resume message JSON)
-- KEYS[5..] keys the agent's end makes obsolete (its checkpoint, stored replies)
-- ARGV[1]  the agent id
-- ARGV[2]  its final node, packed
-- ARGV[3]  TTL in seconds, set on the nodes hash
-- ARGV[4]  the parent's agent id, or '' for a root
-- ARGV[5]  the final statuses, each between commas (",completed,failed,")
-- then the agent's last transcript entries (transcript.lua)
-- Returns {0} if the node was already final (nothing written); {1} if written;
-- {1, resume} if this was the parent's last pending child: ``resume`` (the
-- parent's resume message, now its expected one) is the caller's to send.

local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing and string.find(ARGV[5], ',' .. cjson.decode(existing)['s'] .. ',', 1, true) then return {0} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 5, NKEYS do redis.call('DEL', KEYS[i]) end
append_transcript(ARGV[3])
local parent = ARGV[4]
if parent ~= '' and redis.call('SREM', KEYS[3], ARGV[1]) == 1 and redis.call('SCARD', KEYS[3]) == 0 then
  local resume = redis.call('HGET', KEYS[4], parent)
  if resume then
    redis.call('HSET', KEYS[2], parent, resume)
    redis.call('HDEL', KEYS[4], parent)
    return {1, resume}
  end
end
return {1}

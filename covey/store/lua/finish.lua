-- finish.lua: write an agent's final node once, retire what it kept while running,
-- and count it off its parent's join. Put after join.lua and transcript.lua.
-- KEYS[1]     the job's nodes hash (agent id -> packed node JSON)
-- KEYS[2]     the job's expected messages (agent id -> message JSON)
-- KEYS[3..7]  the parent's join keys (join.lua; a root's own, unused)
-- KEYS[8]     with ARGV[6] = 1: the agent's ledger row, which must be there
-- KEYS[8 + ARGV[6]..] keys the agent's end makes obsolete (its checkpoint, stored replies)
-- ARGV[1]  the agent id
-- ARGV[2]  its final node, packed
-- ARGV[3]  TTL in seconds, set on the nodes hash and the parent's sets
-- ARGV[4]  the parent's agent id, or '' for a root
-- ARGV[5]  the final statuses, each between commas (",completed,failed,")
-- ARGV[6]  1 if KEYS[8] is the agent's ledger row, else 0
-- then the agent's last transcript entries (transcript.lua), then the events of its
-- end (events.lua): the agent's, and for a root the job's
-- Returns (replies: covey.redis_scripts.Reply) {ALREADY} if the node was already
-- final (nothing written); {MISSING} if the ledger row it was given is gone (nothing
-- written: the job's records went with it); {OK} if written; {OK, resume} if the
-- parent's resume is now due (join.lua's join_count_off): the caller sends it.

local guarded = tonumber(ARGV[6])
if guarded == 1 and redis.call('EXISTS', KEYS[8]) == 0 then return {MISSING} end
if not write_node(KEYS[1], ARGV[1], ARGV[2], ARGV[5], 1) then return {ALREADY} end
emit(2)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 8 + guarded, NKEYS do redis.call('DEL', KEYS[i]) end
append_transcript(ARGV[3])
if ARGV[4] == '' then return {OK} end
local resume = join_count_off(join_keys(3), KEYS[2], ARGV[4], ARGV[1], ARGV[3])
if resume then return {OK, resume} end
return {OK}

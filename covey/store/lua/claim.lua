-- claim.lua: take a session for a job, unless another job runs on it; read its conversation.
-- KEYS[1]  the session (its JSON)
-- KEYS[2]  the job running on it
-- ARGV[1]  the job id
-- ARGV[2]  seconds the claim lasts unless the job's end gives it back (the job's TTL)
-- Returns (replies: covey.redis_scripts.Reply) {OK, session JSON or ''} when the job
-- holds it (now, or since an earlier run of its first step); {ELSEWHERE, job id}
-- when another job does.

local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {ELSEWHERE, holder} end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return {OK, redis.call('GET', KEYS[1]) or ''}

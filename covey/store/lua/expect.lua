-- expect.lua: record a job's run_job as its root's expected message before a client
-- sends it, so that one the broker loses at a pop is sent again by a reconciler.
-- Not once the root has opened (its ledger row stands): the job runs or has run,
-- and this is a copy sent again, which its first step drops or answers.
-- KEYS[1]  the job's expected messages (agent id -> message JSON)
-- KEYS[2]  the index of jobs with expected messages (a set of job ids)
-- KEYS[3]  the root's ledger row
-- ARGV[1]  the root's agent id
-- ARGV[2]  the message, JSON
-- ARGV[3]  TTL in seconds
-- ARGV[4]  the job id
-- Returns (replies: covey.redis_scripts.Reply) OK if recorded, ALREADY if the root has opened.

if redis.call('EXISTS', KEYS[3]) == 1 then return ALREADY end
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('SADD', KEYS[2], ARGV[4])
-- as advance.lua: the index lives as long as its newest job
redis.call('EXPIRE', KEYS[2], ttl)
return OK

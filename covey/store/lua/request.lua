-- request.lua: ask a person to approve a tool call, once.
-- KEYS[1]  the job's approvals (call id -> the approval's JSON)
-- KEYS[2]  the approvals not yet decided, across jobs ('<job> <call>' -> deadline)
-- ARGV[1]  the call's id
-- ARGV[2]  the approval, JSON
-- ARGV[3]  its deadline (unix seconds)
-- ARGV[4]  the job's TTL in seconds
-- ARGV[5]  the job id
-- then the event of the request (events.lua), written when it is made
-- Returns (replies: covey.redis_scripts.Reply) OK if asked now; ALREADY if asked before.

if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return ALREADY end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5] .. ' ' .. ARGV[1])
-- as the outbox's index: the set lives as long as its newest job
if redis.call('TTL', KEYS[2]) < tonumber(ARGV[4]) then redis.call('EXPIRE', KEYS[2], ARGV[4]) end
emit(1)
return OK

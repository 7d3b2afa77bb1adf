-- tool_done.lua: keep a finished tool call's result for a replay of its step, once.
-- KEYS[1]  the agent's replies hash (id -> the finished call's result)
-- ARGV[1]  the call's id
-- ARGV[2]  its result
-- ARGV[3]  the job's TTL in seconds
-- then the event of the call's end (events.lua), written with the result
-- Returns (replies: covey.redis_scripts.Reply) OK if kept; ALREADY if an earlier run
-- of the step kept one (which stays: the model may have read it).

if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return ALREADY end
redis.call('EXPIRE', KEYS[1], ARGV[3])
emit(1)
return OK

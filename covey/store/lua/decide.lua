-- decide.lua: record a person's decision on a tool call, once, and release the agent
-- that waits for it.
-- KEYS[1]  the job's approvals (call id -> the approval's JSON)
-- KEYS[2]  the job's held messages (agent id -> the message that takes it up again)
-- KEYS[3]  the job's expected messages (agent id -> message JSON)
-- KEYS[4]  the index of jobs with expected messages
-- KEYS[5]  the approvals not yet decided, across jobs
-- ARGV[1]  the call's id
-- ARGV[2]  the decision: 'approved', 'denied' or 'expired'
-- ARGV[3]  the reason given ('' = none)
-- ARGV[4]  when (ISO 8601)
-- ARGV[5]  the job's TTL in seconds
-- ARGV[6]  the job id
-- then the event of the decision (events.lua), written when it is recorded
-- Returns (replies: covey.redis_scripts.Reply) {MISSING} for a call never asked
-- about; {ALREADY, decision} when it was decided before (this one counts for
-- nothing); {OK, message} when recorded: the message that takes its agent up again,
-- now expected, for the caller to send ('' when the agent is not held yet: it
-- finds the decision when it would wait, and goes on).

local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {MISSING} end
local approval = cjson.decode(raw)
if approval.decision then return {ALREADY, approval.decision} end
approval.decision, approval.decided_at = ARGV[2], ARGV[4]
if ARGV[3] ~= '' then approval.reason = ARGV[3] end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(approval))
redis.call('ZREM', KEYS[5], ARGV[6] .. ' ' .. ARGV[1])
emit(1)
local agent = approval.agent_id
local held = redis.call('HGET', KEYS[2], agent)
if not held then return {OK, ''} end
redis.call('HDEL', KEYS[2], agent)
redis.call('HSET', KEYS[3], agent, held)
redis.call('EXPIRE', KEYS[3], ARGV[5])
redis.call('SADD', KEYS[4], ARGV[6])
redis.call('EXPIRE', KEYS[4], ARGV[5])
return {OK, held}

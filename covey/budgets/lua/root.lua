-- root.lua: what a job's root row holds besides open.lua's fields, and the row,
-- run in open.lua's round trip right after it.
-- KEYS[1]     the root's agent row
-- KEYS[2]     the job's set of scopes (what `snapshot` shows beside the job, charged or not)
-- ARGV[1]     job TTL in seconds
-- ARGV[2]     the job's tool calls cap ('' = none): the root's row caps the whole job's
-- ARGV[3]     the digest of the message opening it, as open.lua was given it ('' = none)
-- ARGV[4]     the delivery that would run the root's first step ('' = none)
-- ARGV[5]     until when it would hold that step (unix seconds)
-- ARGV[6]     now (unix seconds)
-- ARGV[7]     a delivery whose hold ARGV[4] takes over: the broker no longer holds it ('' = none)
-- ARGV[8..]   the job's scopes
-- Returns the root's row as HGETALL's flat list (empty when it is not there).
-- A row another message opened (its digest differs: a run_job reusing a job's id
-- with another spec) is read, never written: the caller refuses that message. So is
-- a row whose first step another delivery holds (`first_run`, until `first_run_until`,
-- unless it is ARGV[7]): the caller sees it named there, and does not run that step beside it.

if (redis.call('HGET', KEYS[1], 'digest') or '') ~= ARGV[3] then
  return redis.call('HGETALL', KEYS[1])
end
if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 then
  local held = redis.call('HMGET', KEYS[1], 'first_run', 'first_run_until')
  if held[1] and held[1] ~= ARGV[4] and held[1] ~= ARGV[7] and tonumber(held[2]) > tonumber(ARGV[6]) then
    return redis.call('HGETALL', KEYS[1])
  end
  redis.call('HSET', KEYS[1], 'first_run', ARGV[4], 'first_run_until', ARGV[5])
end
if #ARGV > 7 then
  redis.call('SADD', KEYS[2], unpack(ARGV, 8))
  redis.call('EXPIRE', KEYS[2], ARGV[1])
end
if ARGV[2] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'tool_calls_limit', ARGV[2])
end
return redis.call('HGETALL', KEYS[1])

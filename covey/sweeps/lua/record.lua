-- record.lua: mark a unit's claim recorded, only while it still names the job.
-- KEYS[1]  the unit's claim (JSON: job, owner, recorded)
-- ARGV[1]  the job the record is of
-- ARGV[2]  the claim as recorded
-- ARGV[3]  its TTL in seconds
-- Returns 1 if marked; 0 if the claim is gone or names another job (a rerun took it).
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw).job == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0

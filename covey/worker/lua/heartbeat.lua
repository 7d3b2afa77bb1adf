-- heartbeat.lua: a worker process says it is alive, and learns what it still holds
-- if it had gone quiet for so long that it counted as dead.
-- KEYS[1]  the process's heartbeat (a string with a TTL)
-- KEYS[2]  the process's held delivery tags (a set)
-- KEYS[3]  the set of every holder
-- ARGV[1]  the process's holder id
-- ARGV[2]  the heartbeat's TTL in milliseconds
-- ARGV[3]  how long the held set and the holders' set are kept, in seconds
-- Returns 1 if the heartbeat still stood (nothing can have been taken); else the
-- held tags, which no longer include any another worker put back.
local stood = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if stood == 1 then
  return 1
end
return redis.call('SMEMBERS', KEYS[2])

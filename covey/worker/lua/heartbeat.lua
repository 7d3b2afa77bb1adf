-- heartbeat.lua: a worker process says it is alive, and learns what it still holds
-- if it had gone quiet for so long that it counted as dead.
-- KEYS[1]  the process's heartbeat (a string with a TTL: the token of its last beat)
-- KEYS[2]  the process's held delivery tags (a set)
-- KEYS[3]  the set of every holder
-- ARGV[1]  the process's holder id
-- ARGV[2]  the heartbeat's TTL in milliseconds
-- ARGV[3]  how long the held set and the holders' set are kept, in seconds
-- ARGV[4]  the token of the process's last beat that it saw answered ('' for none)
-- ARGV[5]  this beat's value, new each beat (its token, TTL and worker's node: covey.config.deliveries)
-- Returns 1 if the heartbeat still held the last answered beat's token (it stood
-- since: nothing can have been taken); else the held tags, which no longer include
-- any another worker put back. A token compares where mere existence would not: a
-- beat that timed out in a partition may still reach Redis when the link returns.
local stood = redis.call('GET', KEYS[1]) == ARGV[4]
redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if stood then
  return 1
end
return redis.call('SMEMBERS', KEYS[2])

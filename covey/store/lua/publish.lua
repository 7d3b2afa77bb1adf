-- publish.lua: write one worker's catalog entry and keep it in the index.
-- KEYS[1]  the worker's entry (JSON of what it serves)
-- KEYS[2]  the index of worker names
-- ARGV[1]  the worker's name
-- ARGV[2]  the entry's JSON
-- ARGV[3]  the entry's TTL in milliseconds
-- Returns 1. The index lives as long as the longest-lived entry in it: workers
-- may run with different TTLs, and one with a short TTL must not cut the index
-- from under an entry that lives longer.

redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1

-- release.lua: give back an expired reservation's tokens and cycle (a dead worker's).
-- KEYS[1]      reservations zset (id -> expiry)
-- KEYS[2]      reservation data hash (id -> JSON {"tokens", "chain", "scopes"})
-- KEYS[3..]    the rows named in that JSON: agent rows, then scope rows
-- KEYS[#KEYS]  index of every live reservation of every job
-- ARGV[1]      reservation id
-- ARGV[2]      now (unix seconds)
-- ARGV[3]      the data JSON the caller read, to build KEYS
-- ARGV[4]      this reservation's member in the index of live reservations
-- Returns 1 if released; 0 if the id is no longer live, not yet expired, or its
-- data changed since the caller read it (settled and reserved again meanwhile).

local rid = ARGV[1]
local expiry = redis.call('ZSCORE', KEYS[1], rid)
if not expiry then
  redis.call('ZREM', KEYS[#KEYS], ARGV[4])  -- settled meanwhile: drop the index entry
  return 0
end
if tonumber(expiry) >= tonumber(ARGV[2]) then return 0 end
local data = redis.call('HGET', KEYS[2], rid)
if data ~= ARGV[3] then return 0 end  -- settled and reserved again meanwhile
local granted = cjson.decode(data).tokens
for i = 3, #KEYS - 1 do
  redis.call('HINCRBY', KEYS[i], 'tokens_reserved', -granted)
  redis.call('HINCRBY', KEYS[i], 'cycles_reserved', -1)
end
redis.call('ZREM', KEYS[1], rid)
redis.call('HDEL', KEYS[2], rid)
redis.call('ZREM', KEYS[#KEYS], ARGV[4])
return 1

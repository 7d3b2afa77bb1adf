-- release.lua: give back an expired reservation's tokens and cycle (a dead worker's).
-- KEYS[1]      the job's calls (id -> JSON {"tokens", "chain", "scopes"} while live)
-- KEYS[2..]    the rows named in that JSON: agent rows, then scope rows
-- KEYS[#KEYS]  index of every live reservation of every job (member -> expiry)
-- ARGV[1]      reservation id
-- ARGV[2]      now (unix seconds)
-- ARGV[3]      the data JSON the caller read, to build KEYS
-- ARGV[4]      this reservation's member in the index of live reservations
-- Its cost hold, if any, is given back with its tokens.
-- Returns 1 if released; 0 if the id is no longer live, not yet expired, or its
-- data changed since the caller read it (settled and reserved again meanwhile).
-- A row gone from Redis (its job wiped or expired) is left gone, not made again.

local rid = ARGV[1]
local expiry = redis.call('ZSCORE', KEYS[#KEYS], ARGV[4])
if not expiry or tonumber(expiry) >= tonumber(ARGV[2]) then return 0 end
local data = redis.call('HGET', KEYS[1], rid)
if data ~= ARGV[3] then return 0 end  -- settled meanwhile (settle dropped the index entry)
local held = cjson.decode(data)
local granted, cost = held.tokens, held.cost or 0
for i = 2, #KEYS - 1 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HINCRBY', KEYS[i], 'tokens_held', -granted)
    redis.call('HINCRBY', KEYS[i], 'cycles_used', -1)
    if cost > 0 then redis.call('HINCRBY', KEYS[i], 'cost_held', -cost) end
  end
end
redis.call('HDEL', KEYS[1], rid)
redis.call('ZREM', KEYS[#KEYS], ARGV[4])
return 1

-- settle.lua: turn a reservation into actual usage, once.
-- KEYS[1]      reservations zset (id -> expiry)
-- KEYS[2]      reservation data hash (id -> JSON {"tokens", "chain", "scopes"})
-- KEYS[3]      settled hash (id -> tokens granted)
-- KEYS[4..]    agent rows, root first, then scope rows
-- KEYS[#KEYS-1] the agent's replies hash (id -> the call's outcome)
-- KEYS[#KEYS]  index of every live reservation of every job
-- ARGV[1]      reservation id
-- ARGV[2]      tokens actually used
-- ARGV[3]      job TTL in seconds
-- ARGV[4]      JSON {"chain": [...], "scopes": [...]}, as given to reserve
-- ARGV[5]      this reservation's member in the index of live reservations
-- ARGV[6]      the call's outcome, kept for a replay of this step ('' = none)
-- Returns 1 if it charged, 0 if the id was already settled, -2 if the chain or
-- scopes differ from the reservation's.
-- A reservation already released as stale is still charged: the tokens were spent.

local rid = ARGV[1]
if redis.call('HEXISTS', KEYS[3], rid) == 1 then return 0 end
local used = tonumber(ARGV[2])
local recorded = used
if redis.call('ZSCORE', KEYS[1], rid) then
  local data = redis.call('HGET', KEYS[2], rid)
  local granted = cjson.decode(data).tokens
  if data ~= '{"tokens":' .. granted .. ',' .. string.sub(ARGV[4], 2) then return -2 end
  for i = 4, #KEYS - 2 do
    redis.call('HINCRBY', KEYS[i], 'tokens_reserved', -granted)
    redis.call('HINCRBY', KEYS[i], 'cycles_reserved', -1)
  end
  redis.call('ZREM', KEYS[1], rid)
  redis.call('HDEL', KEYS[2], rid)
  redis.call('ZREM', KEYS[#KEYS], ARGV[5])
  recorded = granted
end
for i = 4, #KEYS - 2 do
  redis.call('HINCRBY', KEYS[i], 'tokens_used', used)
  redis.call('HINCRBY', KEYS[i], 'cycles_used', 1)
end
redis.call('HSET', KEYS[3], rid, recorded)
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[3]))
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[#KEYS - 1], rid, ARGV[6])
  redis.call('EXPIRE', KEYS[#KEYS - 1], tonumber(ARGV[3]))
end
return 1

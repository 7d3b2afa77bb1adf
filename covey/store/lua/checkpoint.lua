-- checkpoint.lua: save an agent's state at a fan-out round, unless a newer round is saved.
-- KEYS[1]  the agent's checkpoint hash (round, state)
-- ARGV[1]  the round
-- ARGV[2]  the state, JSON
-- ARGV[3]  TTL in seconds
-- Returns 1 if saved; 0 if the stored round is newer (a stale step must not
-- overwrite the state a later step has already moved on from).

local stored = redis.call('HGET', KEYS[1], 'round')
if stored and tonumber(stored) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'round', ARGV[1], 'state', ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1

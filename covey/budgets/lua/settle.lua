-- settle.lua: turn a reservation into actual usage, once.
-- KEYS[1]      the job's calls (id -> JSON {"tokens", "chain", "scopes"} while live,
--              the tokens granted once settled)
-- KEYS[2..]    n agent rows, root first, then the rows of the m scopes the call named
-- KEYS[NKEYS-1] the agent's replies hash (id -> the call's outcome)
-- KEYS[NKEYS]  index of every live reservation of every job
-- ARGV[1]      reservation id
-- ARGV[2]      tokens actually used
-- ARGV[3]      job TTL in seconds
-- ARGV[4]      the chain as a JSON list, as given to reserve
-- ARGV[5]      this reservation's member in the index of live reservations
-- ARGV[6]      the call's outcome, kept for a replay of this step ('' = none)
-- ARGV[7]      n, the number of agent rows
-- ARGV[8..]    the m scope names, in KEYS order
-- ARGV[8+m]    micro-dollars the call actually cost ('' = 0)
-- then the event of the call's end (events.lua), written when it charges
-- Returns (replies: covey.redis_scripts.Reply) {OK, ''} if it charged, {ALREADY, ''}
-- if the id was already settled, {MISMATCH, ''} if the chain or scopes differ from
-- the reservation's, {MISSING, reason} if a row it must charge is missing (gone from
-- Redis): then nothing is written, so no row comes back without its TTL.
-- It charges the rows its reserve charged: the chain and the scopes with a cap.
-- Their tokens_held keeps what was used, not what was granted; the cycle was
-- taken by the reserve. A reservation already released as stale is still charged
-- (the tokens were spent), to the chain and the scopes that have a cap now.
-- Cost moves the same way, in cost_held and cost_used, on rows that hold any.

local rid = ARGV[1]
local data = redis.call('HGET', KEYS[1], rid)
if data and string.sub(data, 1, 1) ~= '{' then return {ALREADY, ''} end
local n = tonumber(ARGV[7])
local m = NKEYS - 3 - n
local used = tonumber(ARGV[2])
local cost = tonumber(ARGV[8 + m]) or 0
local held_cost = 0
local recorded = used
local rows = {}
for i = 1, n do table.insert(rows, KEYS[1 + i]) end

local granted = nil
if data then
  local held = cjson.decode(data)
  if not string.find(data, ',"chain":' .. ARGV[4] .. ',', 1, true) then return {MISMATCH, ''} end
  for _, name in ipairs(held.scopes) do
    local found = nil
    for j = 1, m do
      if ARGV[7 + j] == name then found = j end
    end
    if not found then return {MISMATCH, ''} end
    table.insert(rows, KEYS[1 + n + found])
  end
  granted = held.tokens
  held_cost = held.cost or 0
else
  for j = 1, m do
    local caps = redis.call('HMGET', KEYS[1 + n + j], 'tokens_limit', 'cycles_limit', 'tpm_limit', 'rpm_limit',
      'cost_limit')
    if caps[1] or caps[2] or caps[3] or caps[4] or caps[5] then table.insert(rows, KEYS[1 + n + j]) end
  end
end

for i, key in ipairs(rows) do
  if redis.call('EXISTS', key) == 0 then
    local name = i <= n and ('agent ' .. cjson.decode(ARGV[4])[i]) or 'a scope'
    return {MISSING, 'the ledger row of ' .. name .. ' is missing'}
  end
end
for _, key in ipairs(rows) do
  if granted then
    if granted ~= used then redis.call('HINCRBY', key, 'tokens_held', used - granted) end
  else  -- released as stale: the hold and the cycle were given back
    redis.call('HINCRBY', key, 'tokens_held', used)
    redis.call('HINCRBY', key, 'cycles_used', 1)
  end
  redis.call('HINCRBY', key, 'tokens_used', used)
  if cost ~= held_cost then redis.call('HINCRBY', key, 'cost_held', cost - held_cost) end
  if cost ~= 0 then redis.call('HINCRBY', key, 'cost_used', cost) end
end
if granted then
  redis.call('ZREM', KEYS[NKEYS], ARGV[5])
  recorded = granted
end
redis.call('HSET', KEYS[1], rid, recorded)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[NKEYS - 1], rid, ARGV[6])
  redis.call('EXPIRE', KEYS[NKEYS - 1], tonumber(ARGV[3]))
end
emit(1)
return {OK, ''}

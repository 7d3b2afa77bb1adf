-- open.lua: open an agent's ledger row under its ancestors, or refuse the spawn.
-- KEYS[1]     the child's agent row
-- KEYS[2]     the job's set of agent ids
-- KEYS[3..]   the ancestors' agent rows, root first (none when opening the root)
-- ARGV[1]     child id
-- ARGV[2..4]  requested tokens, cycles, agents limits ('' = unlimited)
-- ARGV[5]     requested max depth
-- ARGV[6]     deadline, ISO 8601 ('' = none)
-- ARGV[7]     job TTL in seconds
-- ARGV[8]     the child's tools, '=' then names joined by commas ('' = every tool)
-- ARGV[9]     the child's deny rules, a JSON list
-- ARGV[10]    the child's own cycle cap ('' = none)
-- ARGV[11]    the global scopes the job charges, a JSON list ('' = not recorded)
-- ARGV[12]    a digest of the message that started the job ('' = none)
-- ARGV[13]    the child's spec, JSON: what its first step runs ('' = none, a root's)
-- ARGV[14]    the share of its budget each of its children asks for ('' = none, a root's)
-- ARGV[15]    the job's priority, which the agent's messages carry ('' = none)
-- ARGV[16..]  the ancestors' ids, in KEYS order (for messages; kept as the row's ancestors, a JSON list)
-- ARGV[NARGV] requested cost limit, micro-dollars ('' = unlimited)
-- then the event of its opening (events.lua), written only when it is opened
-- Returns (replies: covey.redis_scripts.Reply) {OK, tokens, cycles, agents,
-- depth_limit, deadline, cost} ('' = unlimited/none), the stored limits if the child
-- is already open; {REFUSED, reason, 'agent', id, resource} when refused: the ancestor
-- whose cap was reached and which ('depth' or 'agents'); {MISSING, reason} when an
-- ancestor's row is missing (never opened, or gone from Redis): nothing is written.

local function num(v)
  if v == false or v == nil or v == '' then return nil end
  return tonumber(v)
end

local function tighter(a, b)
  if a == nil then return b end
  if b == nil then return a end
  return math.min(a, b)
end

local function left(limit, taken)
  return math.max(0, limit - (tonumber(taken) or 0))
end

local child = KEYS[1]
local ttl = tonumber(ARGV[7])
if redis.call('EXISTS', child) == 1 then
  local r = redis.call('HMGET', child, 'tokens_limit', 'cycles_limit', 'agents_limit', 'depth_limit', 'deadline',
    'cost_limit')
  return {OK, r[1] or '', r[2] or '', r[3] or '', r[4] or '', r[5] or '', r[6] or ''}
end

local tokens, cycles, agents, cost = num(ARGV[2]), num(ARGV[3]), num(ARGV[4]), num(ARGV[NARGV])
local depth_limit, depth = tonumber(ARGV[5]), 0
local n = NKEYS - 2
local rows = {}
for i = 1, n do
  rows[i] = redis.call('HMGET', KEYS[2 + i], 'tokens_limit', 'tokens_held', 'cycles_limit', 'cycles_used',
    'agents_limit', 'agents_spawned', 'depth_limit', 'depth', 'cost_limit', 'cost_held')
  if not rows[i][8] then return {MISSING, 'the ledger row of agent ' .. ARGV[15 + i] .. ' is missing'} end
end

if n > 0 then
  local parent_depth_limit = tonumber(rows[n][7])
  if parent_depth_limit < 1 then
    return {REFUSED, 'spawn refused: depth cap reached (max_depth=' .. parent_depth_limit .. ' at agent ' .. ARGV[15 + n] .. ')',
      'agent', ARGV[15 + n], 'depth'}
  end
  -- Nearest ancestor first, so the message names the cap closest to the child.
  for i = n, 1, -1 do
    local cap = num(rows[i][5])
    if cap ~= nil and (tonumber(rows[i][6]) or 0) + 1 > cap then
      return {REFUSED, 'spawn refused: agent cap reached (max_agents=' .. cap .. ' at agent ' .. ARGV[15 + i] .. ')',
        'agent', ARGV[15 + i], 'agents'}
    end
  end
  for i = 1, n do
    local r = rows[i]
    if num(r[1]) then tokens = tighter(tokens, left(num(r[1]), r[2])) end
    if num(r[3]) then cycles = tighter(cycles, left(num(r[3]), r[4])) end
    if num(r[9]) then cost = tighter(cost, left(num(r[9]), r[10])) end
    -- plus 1: the child itself is one of the ancestor's spawns
    if num(r[5]) then agents = tighter(agents, left(num(r[5]), (tonumber(r[6]) or 0) + 1)) end
  end
  depth_limit = math.min(depth_limit, parent_depth_limit - 1)
  depth = tonumber(rows[n][8]) + 1
  for i = 1, n do  -- ancestors keep the TTL their own open gave them
    redis.call('HINCRBY', KEYS[2 + i], 'agents_spawned', 1)
  end
end

-- Counts start absent (zero): a row holds only what was written to it.
local fields = {'depth', depth, 'depth_limit', depth_limit}
if tokens then table.insert(fields, 'tokens_limit'); table.insert(fields, tokens) end
if cycles then table.insert(fields, 'cycles_limit'); table.insert(fields, cycles) end
if agents then table.insert(fields, 'agents_limit'); table.insert(fields, agents) end
if cost then table.insert(fields, 'cost_limit'); table.insert(fields, cost) end
if ARGV[6] ~= '' then table.insert(fields, 'deadline'); table.insert(fields, ARGV[6]) end
if ARGV[8] ~= '' then table.insert(fields, 'tools'); table.insert(fields, ARGV[8]) end
table.insert(fields, 'deny'); table.insert(fields, ARGV[9])
if ARGV[10] ~= '' then table.insert(fields, 'agent_cycles_limit'); table.insert(fields, ARGV[10]) end
if ARGV[11] ~= '' then table.insert(fields, 'scopes'); table.insert(fields, ARGV[11]) end
if ARGV[12] ~= '' then table.insert(fields, 'digest'); table.insert(fields, ARGV[12]) end
if ARGV[13] ~= '' then table.insert(fields, 'spec'); table.insert(fields, ARGV[13]) end
if ARGV[14] ~= '' then table.insert(fields, 'child_fraction'); table.insert(fields, ARGV[14]) end
if ARGV[15] ~= '' then table.insert(fields, 'priority'); table.insert(fields, ARGV[15]) end
if n > 0 then table.insert(fields, 'ancestors'); table.insert(fields, cjson.encode({unpack(ARGV, 16, 15 + n)})) end
redis.call('HSET', child, unpack(fields))
redis.call('EXPIRE', child, ttl)
emit(1)
redis.call('SADD', KEYS[2], ARGV[1])
-- made with the root's row; made again with its TTL if it alone was lost
if n == 0 or redis.call('TTL', KEYS[2]) < 0 then redis.call('EXPIRE', KEYS[2], ttl) end
return {OK, tokens or '', cycles or '', agents or '', depth_limit, ARGV[6], cost or ''}

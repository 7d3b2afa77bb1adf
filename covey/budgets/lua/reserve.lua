-- reserve.lua: hold tokens and take one cycle on every agent of a chain and every capped scope, or refuse.
-- KEYS[1]        the job's cancel flag
-- KEYS[2]        the job's calls (id -> JSON {"tokens", "chain", "scopes"} while live,
--                the tokens granted once settled)
-- KEYS[3]        the job's set of scope names
-- KEYS[4]        the job's set of agents cancelled by their parents
-- KEYS[5..4+n]   agent rows, root first; then m scope rows; then those scopes'
--                windows of the current minute, in the same order
-- KEYS[NKEYS-1]  the agent's replies hash (id -> the settled call's outcome)
-- KEYS[NKEYS]    index of every live reservation of every job (member -> expiry)
-- ARGV[1]        reservation id
-- ARGV[2]        tokens wanted
-- ARGV[3]        least tokens worth granting
-- ARGV[4]        expiry (unix seconds)
-- ARGV[5]        n, the number of agent rows
-- ARGV[6]        the chain as a JSON list, stored with the grant
-- ARGV[7]        this reservation's member in the index of live reservations
-- ARGV[8]        the agent's own call number, checked against its own cycle cap ('' = unchecked)
-- ARGV[9]        a window's TTL in seconds
-- ARGV[10]       the job's TTL in seconds
-- ARGV[11..]     agent ids then scope names, in KEYS order; then, at c = 10 + n + m:
-- ARGV[c+1]      the most the prompt can cost, micro-dollars ('' = the model has no prices)
-- ARGV[c+2]      micro-dollars per reply token (its USD per million)
-- ARGV[c+3]      the prompt's share of the tokens wanted
-- ARGV[c+4]      the model's name, for a refusal
-- ARGV[c+5]      tokens the agent's own row keeps for its wrap-up (covey.worker.wrap_up)
--                once this call is granted: the call may not use them, and neither may
--                any later call of its descendants; 0 for none (and for the wrap-up
--                call itself, which may spend what its row kept)
-- then the event of the call's start (events.lua), written with the tokens reserved
-- (`reserved`) when a new reservation is granted
-- Returns (replies: covey.redis_scripts.Reply)
-- {OK, tokens, '', record, cost, bound} granted (cost: micro-dollars held): record is
-- the outcome stored by the settle of an id settled before ('' otherwise); a live id
-- gets its grant again. bound: what held the grant to its tokens ('tokens', 'cost' or
-- 'tokens_per_minute'), which a reply cut at them was short of.
-- {REFUSED, 0, reason, row, name, resource} refused: the short row ('agent' or 'scope'),
-- its agent id or scope name, and what it is short of ('tokens', 'cycles',
-- 'tokens_per_minute', 'requests_per_minute', 'cost'); {WINDOW_FULL, 0, reason, row,
-- name, resource} when a scope's window of this minute is full: ask again next minute;
-- {HELD_UP, 0, reason, row, name, resource} when tokens or money are short only because
-- of other calls' reservations in flight (what is used leaves room): ask again once
-- they settle. A call is refused only when what is used leaves it no room.
-- {CANCELLED, 0, 'job cancelled'}; {PARENT_CANCELLED, 0, agent id} when an agent of the
-- chain (the first, root first) was cancelled by its parent; {MISSING, 0, reason} when
-- an agent row is missing (never opened, or gone from Redis): nothing is written.
-- {NO_PRICES, 0, reason, row, name, 'cost'} when a row has a cost cap and the model
-- has no prices.
-- An agent row's `kept` is what its agent keeps for its wrap-up: an ancestor's is room
-- no call of the chain may take, and a row's last grant sets its own.
-- Cost is held like tokens (cost_held, cost_used; cost_limit caps it): a row with a
-- cost cap clamps the reply to what its money left buys at the output price.
-- A row counts tokens_held (used plus held for calls in flight) and cycles_used (a
-- call in flight counts): one field each to check and charge. Settle moves the
-- tokens a call did not use out of tokens_held and adds what it used to tokens_used.
-- A scope with no cap is not charged: a scope every job names (global) is then
-- no key that every call in the fleet writes. A charged scope joins the job's set.
-- A window counts the tokens granted (not those used later) and one request.
-- Rows keep the TTL their open gave them; the calls hash gets the job's TTL, and the
-- index of live reservations at least as long.

local rid = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 1 then return {CANCELLED, 0, 'job cancelled'} end
for i = 1, tonumber(ARGV[5]) do
  if redis.call('SISMEMBER', KEYS[4], ARGV[10 + i]) == 1 then return {PARENT_CANCELLED, 0, ARGV[10 + i]} end
end
local known = redis.call('HGET', KEYS[2], rid)
if known and string.sub(known, 1, 1) == '{' then
  local held = cjson.decode(known)
  return {OK, held.tokens, '', '', held.cost or 0, held.bound or 'tokens'}
end
if known then return {OK, tonumber(known), '', redis.call('HGET', KEYS[NKEYS - 1], rid) or '', 0, 'tokens'} end

local n = tonumber(ARGV[5])
local m = (NKEYS - 6 - n) / 2
local function row(i)
  if i <= n then return 'agent' end
  return 'scope'
end
local function label(i) return row(i) .. ' ' .. ARGV[10 + i] end
local function refuse(status, i, resource, reason) return {status, 0, reason, row(i), ARGV[10 + i], resource} end

-- Agent rows deepest first, then scopes: on a tie the message names the agent itself.
local order = {}
for i = n, 1, -1 do table.insert(order, i) end
for i = n + 1, n + m do table.insert(order, i) end

local c = 10 + n + m
local keep = tonumber(ARGV[c + 5])
-- What row i keeps out of reach of this call: its own new keep, or an ancestor's kept.
local function kept_by(i, r)
  if i == n then return keep end
  if i < n then return tonumber(r[13]) or 0 end
  return 0
end

local granted = tonumber(ARGV[2])
local shortest, shortest_left = nil, nil
local rows, charged = {}, {}
for _, i in ipairs(order) do
  local r = redis.call('HMGET', KEYS[4 + i], 'tokens_limit', 'tokens_held', 'cycles_limit', 'cycles_used',
    'depth', 'agent_cycles_limit', 'tpm_limit', 'rpm_limit', 'cost_limit', 'cost_held', 'tokens_used', 'cost_used',
    'kept')
  rows[i] = r
  if i <= n and not r[5] then return {MISSING, 0, 'the ledger row of ' .. label(i) .. ' is missing'} end
  if i == n and ARGV[8] ~= '' and r[6] and tonumber(ARGV[8]) > tonumber(r[6]) then
    return refuse(REFUSED, i, 'cycles', 'cycle cap reached: max_cycles=' .. r[6] .. ' for this agent')
  end
  if i <= n or r[1] or r[3] or r[7] or r[8] or r[9] then
    table.insert(charged, i)
    if r[3] then
      local cycles_left = tonumber(r[3]) - (tonumber(r[4]) or 0)
      if cycles_left < 1 then
        return refuse(REFUSED, i, 'cycles', 'cycle budget exhausted at ' .. label(i) .. ' (max_cycles=' .. r[3] .. ')')
      end
    end
    if r[1] then
      local tokens_left = tonumber(r[1]) - (tonumber(r[2]) or 0) - kept_by(i, r)
      if shortest_left == nil or tokens_left < shortest_left then shortest, shortest_left = i, tokens_left end
      granted = math.min(granted, tokens_left)
    end
  end
end
granted = math.max(0, granted)
-- Whether every charged row with a cap in field `limit` would have `needed` left of it
-- once the calls in flight settled (what is used, `used`, is what stays; so is what
-- `kept` keeps, in tokens).
local function room_once_settled(limit, used, needed, kept)
  for _, i in ipairs(charged) do
    local r = rows[i]
    if r[limit] and tonumber(r[limit]) - (tonumber(r[used]) or 0) - kept(i, r) < needed then return false end
  end
  return true
end
local function nothing_kept() return 0 end
if granted < tonumber(ARGV[3]) then
  local needed = tonumber(ARGV[3])
  if room_once_settled(1, 11, needed, kept_by) then
    return refuse(HELD_UP, shortest, 'tokens', 'token budget at ' .. label(shortest) .. ' held by calls in flight ('
      .. math.max(0, shortest_left) .. ' left until they settle, ' .. needed .. ' needed)')
  end
  local kept = kept_by(shortest, rows[shortest])
  local why = ''
  if kept > 0 then why = ' and ' .. kept .. ' kept for a wrap-up' end
  return refuse(REFUSED, shortest, 'tokens', 'token budget exhausted at ' .. label(shortest) .. ' ('
    .. math.max(0, shortest_left + kept) .. ' left, ' .. needed .. ' needed' .. why .. ')')
end

-- Money: the poorest row with a cost cap bounds the reply to what it can still pay for.
local bound = 'tokens'

local priced, prompt = ARGV[c + 1] ~= '', tonumber(ARGV[c + 3])
local prompt_cost, rate = tonumber(ARGV[c + 1]) or 0, tonumber(ARGV[c + 2]) or 0
local poorest, poorest_left = nil, nil
for _, i in ipairs(charged) do
  if rows[i][9] then
    if not priced then
      return refuse(NO_PRICES, i, 'cost', 'model ' .. ARGV[c + 4] .. ' has no prices in the models file, and ' .. label(i)
        .. ' has a cost cap')
    end
    local cost_left = tonumber(rows[i][9]) - (tonumber(rows[i][10]) or 0)
    if poorest_left == nil or cost_left < poorest_left then poorest, poorest_left = i, cost_left end
  end
end
if poorest then
  local reply = granted - prompt
  if rate > 0 then reply = math.min(reply, math.floor((poorest_left - prompt_cost) / rate)) end
  -- the ledger keeps whole micro-dollars: one token less if rounding up the reply's cost passes what is left
  if reply > 0 and prompt_cost + math.ceil(reply * rate) > poorest_left then reply = reply - 1 end
  local needed = tonumber(ARGV[3])
  if prompt + reply < needed or prompt_cost > poorest_left then
    local cost_needed = prompt_cost + math.ceil(math.max(0, needed - prompt) * rate)
    if room_once_settled(9, 12, cost_needed, nothing_kept) then
      return refuse(HELD_UP, poorest, 'cost', string.format(
        'cost budget at %s held by calls in flight ($%.6f left until they settle, $%.6f needed)',
        label(poorest), math.max(0, poorest_left) / 1e6, cost_needed / 1e6))
    end
    return refuse(REFUSED, poorest, 'cost', string.format('cost budget exhausted at %s ($%.6f left, $%.6f needed)',
      label(poorest), math.max(0, poorest_left) / 1e6, cost_needed / 1e6))
  end
  if prompt + reply < granted then bound = 'cost' end
  granted = prompt + reply
end

-- Per-minute windows: a cap below one call's need refuses; the reply shrinks to the
-- room left in this minute's window, and a window without room for the least worth
-- granting waits.
for i = n + 1, n + m do
  local tpm, rpm = tonumber(rows[i][7]), tonumber(rows[i][8])
  if tpm and tpm < tonumber(ARGV[3]) then
    return refuse(REFUSED, i, 'tokens_per_minute', label(i) .. ' allows ' .. tpm .. ' tokens per minute, one call needs '
      .. ARGV[3])
  end
  if rpm and rpm < 1 then return refuse(REFUSED, i, 'requests_per_minute', label(i) .. ' allows 0 requests per minute') end
end
for i = n + 1, n + m do
  local tpm, rpm = tonumber(rows[i][7]), tonumber(rows[i][8])
  if tpm or rpm then
    local w = redis.call('HMGET', KEYS[4 + m + i], 'tokens', 'requests')
    if rpm and (tonumber(w[2]) or 0) + 1 > rpm then
      return refuse(WINDOW_FULL, i, 'requests_per_minute', label(i) .. ' is at its ' .. rpm .. ' requests per minute')
    end
    if tpm then
      local room = tpm - (tonumber(w[1]) or 0)
      if room < tonumber(ARGV[3]) then
        return refuse(WINDOW_FULL, i, 'tokens_per_minute', label(i) .. ' is at its ' .. tpm .. ' tokens per minute')
      end
      if room < granted then granted, bound = room, 'tokens_per_minute' end
    end
  end
end

local cost = 0
if priced then cost = prompt_cost + math.ceil(math.max(0, granted - prompt) * rate) end
local scopes = {}
for _, i in ipairs(charged) do
  redis.call('HINCRBY', KEYS[4 + i], 'tokens_held', granted)
  redis.call('HINCRBY', KEYS[4 + i], 'cycles_used', 1)
  if i == n and (tonumber(rows[i][13]) or 0) ~= keep then redis.call('HSET', KEYS[4 + i], 'kept', keep) end
  if cost > 0 then redis.call('HINCRBY', KEYS[4 + i], 'cost_held', cost) end
  if i > n then
    table.insert(scopes, '"' .. ARGV[10 + i] .. '"')  -- scope names hold no quote (ledger.SCOPE_NAME)
    if redis.call('SADD', KEYS[3], ARGV[10 + i]) == 1 then redis.call('EXPIRE', KEYS[3], ARGV[10]) end
    if rows[i][7] or rows[i][8] then
      redis.call('HINCRBY', KEYS[4 + m + i], 'tokens', granted)
      redis.call('HINCRBY', KEYS[4 + m + i], 'requests', 1)
      redis.call('EXPIRE', KEYS[4 + m + i], ARGV[9])
    end
  end
end
redis.call('ZADD', KEYS[NKEYS], ARGV[4], ARGV[7])
if redis.call('TTL', KEYS[NKEYS]) < tonumber(ARGV[10]) then redis.call('EXPIRE', KEYS[NKEYS], ARGV[10]) end
local data = '{"tokens":' .. granted .. ',"chain":' .. ARGV[6] .. ',"scopes":[' .. table.concat(scopes, ',') .. '],"cost":'
  .. cost .. ',"bound":"' .. bound .. '"}'
redis.call('HSET', KEYS[2], rid, data)
redis.call('EXPIRE', KEYS[2], ARGV[10])
emit(1, '"reserved":' .. granted)
return {OK, granted, '', '', cost, bound}

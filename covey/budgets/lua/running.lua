-- running.lua: take a running slot for an agent on every scope of its that caps the
-- agents running at once, or take none and join the queue of the scope that refuses it.
-- KEYS[1..m]       the scopes' rows (their running_limit, if any; a tenant's its weight)
-- KEYS[m+1..2m]    the scopes' running sets (member -> lease expiry), in the same order
-- KEYS[2m+1..3m]   the scopes' waiting sets (member -> its turn: turns.lua), same order
-- KEYS[3m+1..4m]   the scopes' holders (member -> the run of its step that holds its slot), same order
-- KEYS[4m+1..5m]   the scopes' woken sets (member -> when the slot held for it lapses), same order
-- KEYS[5m+1..6m]   the scopes' turns (virtual time, each tenant's last turn), same order
-- KEYS[6m+1]       the job's expected messages (agent id -> message JSON)
-- ARGV[1]          the agent's member: JSON [job id, agent id]
-- ARGV[2]          now (unix seconds)
-- ARGV[3]          the lease's expiry (unix seconds)
-- ARGV[4]          a running set's TTL in seconds (the lease's span)
-- ARGV[5]          a waiting set's TTL in seconds
-- ARGV[6]          the run of the step taking the slot (a token of its task's run); ''
--                  for a run that takes over a slot whoever held it
-- ARGV[7]          the agent id
-- ARGV[8]          the expected message this run took up, as stored; '' for a step
--                  taken up from none (a root's first step)
-- ARGV[9]          which of the scopes (1..m) is the agent's tenant's, whose weight and
--                  turns it waits by; 0 for a job of no tenant: together one tenant of weight 1
-- ARGV[10..9+m]    the scope names, in KEYS order
-- Returns (replies: covey.redis_scripts.Reply) {OK, name...}: held on the capped
-- scopes named (a slot the same run held already has its lease renewed), and no
-- longer waiting on them; {REFUSED, name, taken, limit, ahead, freed...} when a
-- scope refuses it: its slots running or held for woken waiters (`taken` of
-- `limit`), and the waiters ahead of it; nothing is taken, the agent waits in that
-- scope's queue, keeping its turn if it was there already, and gives up every slot
-- held for it; `freed` names the scopes where that leaves a slot free for waiters
-- (one held for it, or the one it was refused as waiters' turns came first): the
-- caller admits them (admit.lua) as its step ends.
-- {ELSEWHERE, name} when another run of the agent's step holds its slot and its lease
-- is live: a duplicate of a step that is running (a copy of its message), which must
-- not run beside it; {MOVED_ON} when the message taken up is no longer the agent's
-- expected one: another copy of it ran the step meanwhile (and gave its slot back),
-- and this one must not run it again.
-- Admission follows the queue: a slot held for a woken waiter is its alone, and while
-- agents wait a free slot goes to the lowest turns (the agent taking among them,
-- counting the turn it would join with). A member whose lease lapsed (its worker
-- died, its renewals stopped), or a woken one whose step did not come in its wake
-- lease, is dropped before counting, so neither holds a slot for longer.

local m = (#KEYS - 1) / 6
local member, now = ARGV[1], ARGV[2]
if ARGV[8] ~= '' and redis.call('HGET', KEYS[6 * m + 1], ARGV[7]) ~= ARGV[8] then return {MOVED_ON} end
local tenant = tonumber(ARGV[9])
local flow = tenant > 0 and ARGV[9 + tenant] or ''
local weight = tenant > 0 and tonumber(redis.call('HGET', KEYS[tenant], 'weight')) or 1

local function refuse(i, turn, new, taken, limit, ahead)
  local waiting, turns = KEYS[2 * m + i], KEYS[5 * m + i]
  if not turn then turn, new = turn_of(waiting, turns, member, flow, weight) end
  if new then
    redis.call('ZADD', waiting, turn_text(turn), member)
    redis.call('HSET', turns, flow, turn_text(turn))
    redis.call('EXPIRE', turns, ARGV[5])
  end
  redis.call('EXPIRE', waiting, ARGV[5])
  local freed = {}
  for k = 1, m do
    if redis.call('ZREM', KEYS[4 * m + k], member) == 1 then table.insert(freed, ARGV[9 + k]) end
  end
  if taken < limit then table.insert(freed, ARGV[9 + i]) end
  return {REFUSED, ARGV[9 + i], taken, limit, ahead, unpack(freed)}
end

local capped, jumped = {}, {}
for i = 1, m do
  local limit = tonumber(redis.call('HGET', KEYS[i], 'running_limit'))
  if limit then
    local running, waiting, woken = KEYS[m + i], KEYS[2 * m + i], KEYS[4 * m + i]
    redis.call('ZREMRANGEBYSCORE', running, '-inf', '(' .. now)
    redis.call('ZREMRANGEBYSCORE', woken, '-inf', '(' .. now)
    if redis.call('ZSCORE', running, member) then
      if ARGV[6] ~= '' and redis.call('HGET', KEYS[3 * m + i], member) ~= ARGV[6] then return {ELSEWHERE, ARGV[9 + i]} end
    elseif not redis.call('ZSCORE', woken, member) then
      local taken = redis.call('ZCARD', running) + redis.call('ZCARD', woken)
      local turn, new, ahead = nil, false, 0
      if redis.call('ZCARD', waiting) > 0 then
        turn, new = turn_of(waiting, KEYS[5 * m + i], member, flow, weight)
        if new then
          ahead = redis.call('ZCOUNT', waiting, '-inf', '(' .. turn_text(turn))
        else
          ahead = redis.call('ZRANK', waiting, member)
        end
      end
      if taken + ahead >= limit then return refuse(i, turn, new, taken, limit, ahead) end
      jumped[i] = {turn, new}
    end
    table.insert(capped, i)
  end
end
local names = {}
for _, i in ipairs(capped) do
  redis.call('ZADD', KEYS[m + i], ARGV[3], member)
  redis.call('EXPIRE', KEYS[m + i], ARGV[4])
  redis.call('ZREM', KEYS[2 * m + i], member)
  redis.call('ZREM', KEYS[4 * m + i], member)
  redis.call('HSET', KEYS[3 * m + i], member, ARGV[6])
  redis.call('EXPIRE', KEYS[3 * m + i], ARGV[4])
  local turn = jumped[i] and jumped[i][1]
  if turn then  -- admitted from the queue, or as a newcomer whose turn came before it
    if jumped[i][2] then redis.call('HSET', KEYS[5 * m + i], flow, turn_text(turn)) end
    admitted(KEYS[5 * m + i], turn, ARGV[5])
  end
  table.insert(names, ARGV[9 + i])
end
return {OK, unpack(names)}

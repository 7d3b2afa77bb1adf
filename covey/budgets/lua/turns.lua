-- turns.lua (a library of running.lua and admit.lua): a capped scope's weighted fair
-- queue. A waiter's turn is a virtual finish tag: the turn of its tenant's last
-- waiter, or the scope's virtual time (the turn admitted last) if that is later, so
-- an idle tenant banks no turns, plus 1 / its tenant's weight. Waiters are admitted
-- lowest turn first: tenants that all wait are admitted in proportion to their
-- weights, and each tenant's waiters in the order they came.

-- A turn as stored: every digit of the double (Lua's own tostring keeps 14).
local function turn_text(turn)
  return string.format('%.17g', turn)
end

-- The turn of `member` in `waiting`, and whether it is new: its own while it waits,
-- else the one it takes joining now as a waiter of `flow` of weight `weight`.
local function turn_of(waiting, turns, member, flow, weight)
  local own = redis.call('ZSCORE', waiting, member)
  if own then return tonumber(own), false end
  local virtual = tonumber(redis.call('HGET', turns, 'virtual')) or 0
  local last = tonumber(redis.call('HGET', turns, flow)) or 0
  return math.max(virtual, last) + 1 / weight, true
end

-- A waiter of turn `turn` was admitted: the scope's virtual time moves up to it.
local function admitted(turns, turn, ttl)
  if turn > (tonumber(redis.call('HGET', turns, 'virtual')) or 0) then
    redis.call('HSET', turns, 'virtual', turn_text(turn))
  end
  redis.call('EXPIRE', turns, ttl)
end

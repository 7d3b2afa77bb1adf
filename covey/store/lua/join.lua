-- join.lua: a waiting agent's join with its children; put before advance.lua (which
-- makes an agent wait) and finish.lua (which counts a child off). A waiter's join
-- keys come in this order (covey.store.join.keys), from KEYS[at] on:
--   pending  its children of a join 'all' still running (a set)
--   joins    the job's parked resumes (waiting agent id -> its resume message JSON)
--   awaited  its children of a join 'each' still running (a set)
--   done     its children of a join 'each' that ended while it ran (a set)
--   batch    the children its expected resume hands it (a set)
-- 'all': the last child to end sends the resume; 'each': the next child to end while
-- the agent is idle sends it, and those ending while it runs are handed over at its
-- next wait; 'now': as 'each', but the resume is due at once (the agent holds results
-- of children refused at open already).

local function join_keys(at)
  return {pending = KEYS[at], joins = KEYS[at + 1], awaited = KEYS[at + 2], done = KEYS[at + 3],
    batch = KEYS[at + 4]}
end

-- Agent `agent` waits on the children named by ARGV[first], ARGV[first + 2], ... (each
-- followed by its message, recorded in `expected`) under join `kind`. Returns true when
-- its `resume` is due at once (then it is the agent's expected message, and the caller
-- sends it); else the resume is parked until a child's end makes it due.
local function join_wait(j, expected, agent, resume, kind, first, last, ttl)
  local waits = j.pending
  if kind == 'all' then
    redis.call('DEL', j.pending)
  else
    waits = j.awaited
  end
  for i = first, last, 2 do
    redis.call('SADD', waits, ARGV[i])
    redis.call('HSET', expected, ARGV[i], ARGV[i + 1])
  end
  if redis.call('EXISTS', waits) == 1 then redis.call('EXPIRE', waits, ttl) end
  if kind ~= 'all' and (kind == 'now' or redis.call('SCARD', j.done) > 0) then
    if redis.call('EXISTS', j.done) == 1 then
      redis.call('RENAME', j.done, j.batch)
      redis.call('EXPIRE', j.batch, ttl)
    end
    redis.call('HSET', expected, agent, resume)
    return true
  end
  redis.call('HSET', j.joins, agent, resume)
  redis.call('EXPIRE', j.joins, ttl)
  return false
end

-- Count child `child` off its parent `parent`'s join. Returns the parent's resume when
-- this end makes it due (the last child of a join 'all', or one of a join 'each' whose
-- parent is idle: the child is its batch); it is then the parent's expected message,
-- and the caller sends it. A child the parent waits on no more counts for nothing.
local function join_count_off(j, expected, parent, child, ttl)
  if redis.call('SREM', j.pending, child) == 1 then
    if redis.call('SCARD', j.pending) > 0 then return nil end
  elseif redis.call('SREM', j.awaited, child) == 1 then
    -- Idle (its resume is parked in the joins): this child wakes it. Running (the
    -- resume is out, or it has not waited yet): its next wait takes this child up.
    local into = j.done
    if redis.call('HEXISTS', j.joins, parent) == 1 then into = j.batch end
    redis.call('SADD', into, child)
    redis.call('EXPIRE', into, ttl)
    if into == j.done then return nil end
  else
    return nil
  end
  local resume = redis.call('HGET', j.joins, parent)
  if resume then
    redis.call('HSET', expected, parent, resume)
    redis.call('HDEL', j.joins, parent)
  end
  return resume
end


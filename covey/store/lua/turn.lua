-- turn.lua: a job's end on its session: its turn kept (once), the oldest turns
-- dropped past the session's size cap, and the session given back.
-- KEYS[1]  the session (its JSON: {"turns": [...], "dropped": n})
-- KEYS[2]  the job running on it
-- KEYS[3]  the job's nodes hash
-- ARGV[1]  the job id
-- ARGV[2]  the turn, JSON ('' = none: the job did not complete)
-- ARGV[3]  the session's cap in bytes
-- ARGV[4]  the session's TTL in seconds
-- ARGV[5]  the root's final record, as this end wrote it: kept only if it is the one
--          written (a duplicate end that came second keeps nothing)
-- Returns (replies: covey.redis_scripts.Reply) OK, or ALREADY when another end was written.

if redis.call('HGET', KEYS[3], 'root') ~= ARGV[5] then return ALREADY end
if ARGV[2] ~= '' then
  local raw = redis.call('GET', KEYS[1])
  local session = raw and cjson.decode(raw) or {turns = {}, dropped = 0}
  local kept = false
  for _, turn in ipairs(session.turns) do
    if turn.job_id == ARGV[1] then kept = true end
  end
  if not kept then
    table.insert(session.turns, cjson.decode(ARGV[2]))
    while #session.turns > 1 and #cjson.encode(session.turns) > tonumber(ARGV[3]) do
      table.remove(session.turns, 1)
      session.dropped = session.dropped + 1
    end
    redis.call('SET', KEYS[1], cjson.encode(session), 'EX', ARGV[4])
  end
end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return OK

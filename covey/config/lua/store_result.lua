-- store_result.lua: store a task's result unless a success is stored already, and
-- publish it to the clients waiting on it: Celery's GET, then SET and PUBLISH, in
-- one atomic round trip, so two runs of a task cannot both see "no success yet".
-- KEYS[1]  the task's result key
-- ARGV[1]  the encoded meta (Celery's JSON)
-- ARGV[2]  its expiry in seconds, '' for none
-- ARGV[3]  the channel to publish the meta on (Celery's is the key's name)
-- Returns 1 when stored and published; 0 when a stored SUCCESS was kept and
-- nothing written.

local stored = redis.call('GET', KEYS[1])
if stored then
  -- A stored value that is not JSON meta (corrupt, or another serializer's) is
  -- not a success: Celery's own GET would fail to decode it and so fail the
  -- store; here a readable result replaces what no client could read anyway.
  local ok, meta = pcall(cjson.decode, stored)
  if ok and type(meta) == 'table' and meta['status'] == 'SUCCESS' then
    return 0
  end
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1

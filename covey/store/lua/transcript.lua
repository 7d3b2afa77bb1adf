-- transcript.lua: put after events.lua and before record.lua, finish.lua and
-- advance.lua, which carry an agent's new transcript entries on the round trip they
-- make anyway. Their transcript arguments come last but for the events': ARGV ends
-- with cap, field, entry, ..., field, entry, then n (how many arguments that was,
-- cap included; 0 for none), and when n > 0 KEYS ends with the agent's transcript
-- hash. A script reads its own arguments up to NARGV and NKEYS, and calls
-- append_transcript(ttl) once it has written.
-- A field is written once: a redelivered step sends its entries again and they
-- are skipped. Fields arrive in order; the first entry that would take the hash
-- past cap bytes (fields and values) is not written, nor any after it: the hash
-- keeps cut_from and cut_to (the first and last field cut), cut_entries and
-- cut_bytes instead, and bytes (what it holds).

local transcript_n = tonumber(ARGV[NARGV])
local transcript_last = NARGV - 1  -- the last entry
local transcript_key = KEYS[NKEYS]
NARGV = NARGV - 1 - transcript_n
NKEYS = NKEYS - (transcript_n > 0 and 1 or 0)

local function append_transcript(ttl)
  if transcript_n == 0 then return end
  local key, first = transcript_key, NARGV + 1
  local cap = tonumber(ARGV[first])
  local meta = redis.call('HMGET', key, 'bytes', 'cut_to')
  local bytes, cut_to = tonumber(meta[1]) or 0, meta[2]
  for i = first + 1, transcript_last - 1, 2 do
    local field, entry = ARGV[i], ARGV[i + 1]
    if not (cut_to and field <= cut_to) and redis.call('HEXISTS', key, field) == 0 then
      local size = #field + #entry
      if not cut_to and bytes + size <= cap then
        redis.call('HSET', key, field, entry)
        bytes = bytes + size
      else
        if not cut_to then redis.call('HSET', key, 'cut_from', field) end
        cut_to = field
        redis.call('HSET', key, 'cut_to', field)
        redis.call('HINCRBY', key, 'cut_entries', 1)
        redis.call('HINCRBY', key, 'cut_bytes', size)
      end
    end
  end
  redis.call('HSET', key, 'bytes', bytes)
  redis.call('EXPIRE', key, ttl)
end


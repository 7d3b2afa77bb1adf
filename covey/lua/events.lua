-- events.lua: put first, before transcript.lua and the script itself. A script that
-- writes a job's events (covey.events) takes them last, after everything else:
-- ARGV ends with the job's TTL, event, ..., event, then k, how many events (a lone
-- 0 when there are none), and when k > 0 KEYS ends with the job's event stream. The
-- script reads its own arguments up to NARGV and NKEYS (transcript.lua takes its
-- part off before them), and calls emit(i) in the branch that writes the state the
-- i-th event reports: a redelivered step's script that writes nothing writes no
-- event, and an event is never written without its state.

local events_k = tonumber(ARGV[#ARGV])
local events_at = #ARGV - 1 - events_k  -- ARGV[events_at] is the TTL when k > 0
local NARGV = events_k > 0 and events_at - 1 or #ARGV - 1
local NKEYS = #KEYS - (events_k > 0 and 1 or 0)

-- Append the i-th event (none past k, none empty); `more`, raw JSON members
-- ('"reserved":120'), goes into its object: what only the script knows. The
-- stream's TTL is set once a script, at its first event: a spawn opening ten
-- children, a job's last agent ending it, write several.
local kept = false
local function emit(i, more)
  if i > events_k or ARGV[events_at + i] == '' then return end
  local event = ARGV[events_at + i]
  if more then event = string.sub(event, 1, -2) .. ',' .. more .. '}' end
  redis.call('XADD', KEYS[#KEYS], '*', 'e', event)
  if not kept then
    redis.call('EXPIRE', KEYS[#KEYS], ARGV[events_at])
    kept = true
  end
end


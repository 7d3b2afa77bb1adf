-- record.lua: write tree nodes, but never over a final one (nodes.lua).
-- KEYS[1]  the job's nodes hash (agent id -> packed node JSON)
-- ARGV[1]  TTL in seconds, set on the hash at every write (no node outlives its job's retention)
-- ARGV[2]  the final statuses, each between commas (",completed,failed,")
-- ARGV[3..] agent id, packed node: the nodes to write
-- then an agent's transcript entries (transcript.lua), then one event per node, in
-- their order ('' for none), written if the node's status changes (events.lua)
-- Returns how many nodes were written (a node already final is left as it is:
-- a stale or duplicate step must not take back an agent's end).

local written = 0
for i = 3, NARGV, 2 do
  if write_node(KEYS[1], ARGV[i], ARGV[i + 1], ARGV[2], (i - 1) / 2) then written = written + 1 end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
append_transcript(ARGV[1])
return written

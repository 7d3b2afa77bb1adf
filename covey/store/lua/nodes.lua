-- nodes.lua: write a tree node, never over a final one, with the event of the move
-- when its status changes (events.lua). Put before record.lua, advance.lua and
-- finish.lua, after events.lua.

-- Write `packed` as agent `agent`'s node in hash `nodes` unless the node there is
-- final (its status is one of `finals`, each between commas); returns whether it
-- wrote. A write that changes the node's status emits the `event`-th event.
local function write_node(nodes, agent, packed, finals, event)
  local existing = redis.call('HGET', nodes, agent)
  local was = existing and cjson.decode(existing)['s']
  if was and string.find(finals, ',' .. was .. ',', 1, true) then return false end
  redis.call('HSET', nodes, agent, packed)
  if was ~= cjson.decode(packed)['s'] then emit(event) end
  return true
end


-- store_guard.lua, run before store_result.lua as one script: store only while
-- hash KEYS[2]'s field ARGV[4] holds ARGV[5] (the end its caller just recorded
-- there, in the same round trip): a run whose end another run's preceded stores nothing.
if redis.call('HGET', KEYS[2], ARGV[4]) ~= ARGV[5] then return 0 end

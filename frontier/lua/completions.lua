-- Count a worker's completions for the weights (frontier/registry.py): this minute's, its lifetime total, and its
-- outstanding tasks, unless its job id is retired.
-- KEYS: retired, activity. ARGV: now, job, n. -1: fenced.
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return -1 end
local n = tonumber(ARGV[3])
redis.call('HINCRBY', KEYS[2], 'd' .. minute, n)
redis.call('HSET', KEYS[2], 'b' .. minute, 1)
redis.call('HINCRBY', KEYS[2], 'done', n)
if redis.call('HINCRBY', KEYS[2], 'out', -n) < 0 then redis.call('HSET', KEYS[2], 'out', 0) end
return n

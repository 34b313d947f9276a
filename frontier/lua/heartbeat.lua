-- A worker's heartbeat (frontier/registry.py), its busy flag for this minute and its progress: how long ago its
-- feed thread last made a pass (walk, take, commit). The heartbeat has a thread of its own, so a fresh heartbeat
-- with a large lag is a worker that is slow, not gone (WorkerRegistry.health).
-- KEYS: workers, retired, activity. ARGV: now, job, busy (0/1), lag in seconds ('' = not reported).
-- -1: fenced, 0: not registered (expired).
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return -1 end
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.6f', now), ARGV[2])
if ARGV[3] == '1' then redis.call('HSET', KEYS[3], 'b' .. minute, 1) end
if ARGV[4] ~= nil and ARGV[4] ~= '' then redis.call('HSET', KEYS[3], 'lag', ARGV[4]) end
return 1

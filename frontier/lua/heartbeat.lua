-- A worker's heartbeat (frontier/registry.py), and its busy flag for this minute.
-- KEYS: workers, retired, activity. ARGV: now, job, busy (0/1). -1: fenced, 0: not registered (expired).
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return -1 end
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.6f', now), ARGV[2])
if ARGV[3] == '1' then redis.call('HSET', KEYS[3], 'b' .. minute, 1) end
return 1

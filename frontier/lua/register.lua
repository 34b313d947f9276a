-- A worker joins the registry (frontier/registry.py): its first heartbeat, unless its job id is retired.
-- KEYS: workers, retired, activity. ARGV: now, job. -1: fenced.
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return -1 end
redis.call('ZADD', KEYS[1], string.format('%.6f', now), ARGV[2])
redis.call('HSETNX', KEYS[3], 'started', string.format('%.6f', now))
return 1

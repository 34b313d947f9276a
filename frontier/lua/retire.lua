-- Retire (fence) a job whose heartbeat is too old (frontier/registry.py).
-- KEYS: workers, retired. ARGV: now, job, latest heartbeat that still counts as dead ('+inf': retire anyway).
-- 1: retired now, 0: alive again (a late heartbeat arrived) or already retired.
local beat = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not beat then
  if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
elseif ARGV[3] ~= '+inf' and tonumber(beat) > tonumber(ARGV[3]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], string.format('%.6f', now), ARGV[2])
return 1

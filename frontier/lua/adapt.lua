-- Adaptive delay (frontier/adaptive.py, AdaptiveRule.next_delay — the same rule, sample by sample): a worker
-- reports the responses of an adaptive site, and the site's delay shared by every worker follows them.
--
-- KEYS[1] adaptive:{d}
-- ARGV[1] now (us, '' = the Redis clock)   then per sample, 3 values: latency (us), HTTP status (0: no response),
-- error ('1': 5xx, timeout, connection error)
-- ARGV[-4..-1] (the last four): the configured spacing (us)   target concurrency   max delay (us)   TTL (ms)
-- Reply: the new delay (us).
local n = #ARGV
local floor, target_concurrency = tonumber(ARGV[n - 3]), tonumber(ARGV[n - 2])
local max_delay, ttl = tonumber(ARGV[n - 1]), tonumber(ARGV[n])
local state = redis.call('HMGET', KEYS[1], 'delay', 'errors')
local delay, errors = tonumber(state[1]) or 0, tonumber(state[2]) or 0
local latency = 0
for i = 2, n - 4, 3 do
  latency = tonumber(ARGV[i])
  local status, error = tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'
  if error then
    -- an error doubles the delay, from no less than the configured spacing and the response time
    delay = math.min(max_delay, 2 * math.max(delay, floor, latency))
    errors = errors + 1
  else
    local target = latency / target_concurrency
    local new = math.max(target, (delay + target) / 2)
    -- a small answer (a redirect, a 404) is quick by nature: it never makes the site look faster
    if status == 200 or new > delay then delay = math.min(max_delay, new) end
    errors = 0
  end
end
delay = math.floor(delay)
redis.call('HSET', KEYS[1], 'delay', delay, 'latency', math.floor(latency), 'errors', errors, 'at', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return delay

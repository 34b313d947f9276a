-- A fetch of a host's robots.txt failed with a server or network error (RFC 9309 2.3.1.3): the host is not crawled
-- until the next attempt, which waits twice as long after each failure (from ARGV[3] up to ARGV[4]), or what the
-- server's Retry-After asked for (at most ARGV[4]). Once the outage has lasted ARGV[6] seconds, the RFC's escape:
-- the robots.txt is taken as unavailable (allow all, as a 4xx) until the next attempt. Releases the caller's claim.
--
-- KEYS[1] robots:{d}:<host>   KEYS[2] robots:{d}:<host>:lock   KEYS[3] robots:{d}:<host>:down
-- ARGV[1] now in seconds ('' = the Redis clock)   ARGV[2] the caller's claim token   ARGV[3] first retry (s)
-- ARGV[4] longest retry (s)   ARGV[5] Retry-After (s, '' = none)   ARGV[6] outage limit (s)   ARGV[7] why
-- Reply: {'down' | 'escaped', seconds the outage has lasted, seconds until the next attempt}
-- now: set by the preamble messaging/lua/now_seconds.lua (ARGV[1], or the Redis clock)
local since = tonumber(redis.call('HGET', KEYS[3], 'since')) or now
local failures = redis.call('HINCRBY', KEYS[3], 'failures', 1)
local longest = tonumber(ARGV[4])
local retry = math.min(longest, tonumber(ARGV[3]) * 2 ^ math.min(failures - 1, 30))
local asked = tonumber(ARGV[5])
if asked then
  retry = math.min(longest, math.max(1, asked))
end
redis.call('HSET', KEYS[3], 'since', string.format('%.6f', since), 'retry_at', string.format('%.6f', now + retry),
           'why', ARGV[7])
redis.call('PEXPIRE', KEYS[3], math.ceil((tonumber(ARGV[6]) + longest + 60) * 1000))
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
local lasted = now - since
if lasted >= tonumber(ARGV[6]) then
  redis.call('SET', KEYS[1], '', 'PX', math.max(1, math.ceil(retry * 1000)))
  return {'escaped', string.format('%.3f', lasted), string.format('%.3f', retry)}
end
return {'down', string.format('%.3f', lasted), string.format('%.3f', retry)}

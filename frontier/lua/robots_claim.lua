-- Claim the fetch of one host's robots.txt for the cluster, unless its rules are known or it is in an outage.
-- One call, so that a process can never miss a robots.txt stored between its check and its claim (the race that
-- gave 1-8 % of hosts two fetches 0-30 ms apart).
--
-- KEYS[1] robots:{d}:<host>   KEYS[2] robots:{d}:<host>:lock   KEYS[3] robots:{d}:<host>:down
-- ARGV[1] now in seconds ('' = the Redis clock)   ARGV[2] the caller's claim token   ARGV[3] claim TTL (ms)
-- Reply: {'cached', body} | {'down', seconds until the next attempt, why} | {'claimed', ''}
--        | {'mine', ms left} (the caller holds the claim already) | {'pending', ms left} (another process holds it)
local body = redis.call('GET', KEYS[1])
if body then
  return {'cached', body}
end
-- now: set by the preamble messaging/lua/now_seconds.lua (ARGV[1], or the Redis clock)
local retry_at = tonumber(redis.call('HGET', KEYS[3], 'retry_at'))
if retry_at and retry_at > now then
  return {'down', tostring(retry_at - now), redis.call('HGET', KEYS[3], 'why') or ''}
end
local holder = redis.call('GET', KEYS[2])
if not holder then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', tonumber(ARGV[3]))
  return {'claimed', ''}
end
local left = tostring(redis.call('PTTL', KEYS[2]))
if holder == ARGV[2] then
  return {'mine', left}
end
return {'pending', left}

-- Publish a host's robots.txt (a body, or '' when it is missing: 4xx), end its outage, release the caller's claim.
--
-- KEYS[1] robots:{d}:<host>   KEYS[2] robots:{d}:<host>:lock   KEYS[3] robots:{d}:<host>:down
-- ARGV[1] the caller's claim token   ARGV[2] the body   ARGV[3] TTL (ms)
redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
redis.call('DEL', KEYS[3])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1

-- Extend the caller's claim on a host's robots.txt fetch while the fetch still runs.
--
-- KEYS[1] robots:{d}:<host>:lock   ARGV[1] the caller's claim token   ARGV[2] claim TTL (ms)
-- Reply: 1 when extended, 0 when the claim is no longer the caller's (expired, or taken over).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0

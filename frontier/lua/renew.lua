-- Extend a lease that is still held.
--
-- KEYS[1] <job>:{d}:inflight   KEYS[2] <job>:{d}:leasescores
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] lease (us)   ARGV[3] the task
-- ARGV[4] TTL of the lease scores (ms)
-- Reply: the new deadline (us, as a string), or false when the lease is no longer held.
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  return false
end
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local deadline = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], deadline, ARGV[3])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]))
return string.format('%d', deadline)

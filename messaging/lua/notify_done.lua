-- Record a delivery attempt (messaging/notify.py): delivered (a 2xx: never sent again), retry (due again at ARGV[6])
-- or failed (given up). A record that is no longer pending is left as it is. Delivered and given-up records expire
-- after ARGV[7] seconds, long enough that the event is never enqueued again. now_seconds.lua is prepended.
-- KEYS: due zset, event hash. ARGV: now (or ''), event id, outcome, HTTP status (or ''), error, retry at, ttl.
-- Reply: 1 recorded, 0 not pending.
if redis.call('HGET', KEYS[2], 'state') ~= 'pending' then return 0 end
redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HSET', KEYS[2], 'status', ARGV[4], 'error', ARGV[5], 'attempted', tostring(now))
redis.call('HDEL', KEYS[2], 'claimed')
local outcome = ARGV[3]
if outcome == 'retry' then
  redis.call('ZADD', KEYS[1], ARGV[6], ARGV[2])
  return 1
end
redis.call('HSET', KEYS[2], 'state', outcome == 'delivered' and 'delivered' or 'failed', 'finished', tostring(now))
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[7])
return 1

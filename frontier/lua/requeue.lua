-- Return expired leases to their domain queue, at the score they had there (their place in priority order).
--
-- KEYS[1] <job>:{d}:queue   KEYS[2] <job>:{d}:inflight   KEYS[3] <job>:{d}:leasescores
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] most leases to return in this call
-- Reply: the returned tasks.
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, task in ipairs(expired) do
  -- a lost score (its hash expired long after the job died) puts the task first: it is overdue
  local score = redis.call('HGET', KEYS[3], task) or 0
  redis.call('ZREM', KEYS[2], task)
  redis.call('HDEL', KEYS[3], task)
  redis.call('ZADD', KEYS[1], score, task)
end
return expired

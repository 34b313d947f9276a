-- Return the job's leases of one domain that its worker does not hold to the domain queue, at the score they had
-- there, whatever their deadline. Run by the worker itself after its Redis calls failed and work again: Redis may
-- have run a take whose reply was lost (a lease nobody processes), or come back from an AOF that lost its last
-- answered writes (a completion undone: a lease nobody holds). Either waited for its deadline before.
--
-- KEYS[1] <job>:{d}:queue   KEYS[2] <job>:{d}:inflight   KEYS[3] <job>:{d}:leasescores
-- ARGV: the tasks whose leases the worker holds in this domain (kept)
-- Reply: the returned tasks.
local held = {}
for _, task in ipairs(ARGV) do
  held[task] = true
end
local returned = {}
for _, task in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not held[task] then
    -- a lost score (its hash expired long after the job died) puts the task first: it is overdue
    local score = redis.call('HGET', KEYS[3], task) or 0
    redis.call('ZREM', KEYS[2], task)
    redis.call('HDEL', KEYS[3], task)
    redis.call('ZADD', KEYS[1], score, task)
    returned[#returned + 1] = task
  end
end
return returned

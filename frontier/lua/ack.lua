-- Acknowledge a lease: the task is complete. A lease that is no longer held (expired and returned to the queue,
-- or moved back to seeds because the job was retired) is refused: that refusal is the fence at the domain slot.
--
-- KEYS[1] <job>:{d}:inflight   KEYS[2] <job>:{d}:leasescores   ARGV[1] the task
-- Reply: 1 acknowledged, 0 not held.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1

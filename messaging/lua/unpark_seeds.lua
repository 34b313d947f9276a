-- Resume a crawl in the slot of seeds (messaging.pause): it leaves crawls:{seeds}:paused (the dispatcher parks none
-- of its tasks from then on), and up to ARGV[2] of its parked tasks go back into seeds at their old score. A task
-- that is in seeds already (pushed again meanwhile) is merged: it was counted twice, once is taken back.
-- KEYS: crawls:{seeds}:paused, seeds, parked:{seeds}:<id>, pending:{seeds}. ARGV: crawlid, most tasks to move.
-- Reply: {moved, still parked}.
redis.call('HDEL', KEYS[1], ARGV[1])
local batch = redis.call('ZRANGE', KEYS[3], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #batch, 2 do
  if redis.call('ZADD', KEYS[2], 'NX', batch[i + 1], batch[i]) == 0 then pending_sub(KEYS[4], ARGV[1], 1) end
  redis.call('ZREM', KEYS[3], batch[i])
end
return {#batch / 2, redis.call('ZCARD', KEYS[3])}

-- Begin one firing of a schedule (master/schedules.py), fenced like staging: only the leader of the current epoch
-- may begin one. The due time is marked `pending` on the schedule before the crawl is submitted, so that a leader
-- that dies meanwhile leaves it for the next one to complete (the same crawl id, which the intake guard makes a
-- no-op if it was submitted already) instead of skipping it or firing it twice.
-- KEYS: epoch, schedule hash. ARGV: epoch, due, crawl id.
-- Reply: 1 begun (or already pending at this due time), 0 not to fire (gone, paused, fired, another pending).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local pending = redis.call('HGET', KEYS[2], 'pending')
if pending then
  if pending == ARGV[2] then return 1 end
  return 0
end
if redis.call('HEXISTS', KEYS[2], 'paused') == 1 then return 0 end
local after = tonumber(redis.call('HGET', KEYS[2], 'after') or '0') or 0
if tonumber(ARGV[2]) <= after then return 0 end
redis.call('HSET', KEYS[2], 'pending', ARGV[2], 'pending_crawlid', ARGV[3])
return 1

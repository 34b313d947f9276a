-- Record a firing (master/schedules.py): the pending due time becomes the last firing, `after` moves up to it, and an
-- entry goes to the history. Not fenced: a stale leader that submitted the crawl states a fact; a firing recorded
-- already (by the next leader) is left alone.
-- KEYS: schedule hash, history. ARGV: due, crawl id, fired at, seconds late, outcome, history cap, history entry.
-- Reply: 1 recorded, 0 not pending at this due time.
if redis.call('HGET', KEYS[1], 'pending') ~= ARGV[1] then return 0 end
local after = tonumber(redis.call('HGET', KEYS[1], 'after') or '0') or 0
if tonumber(ARGV[1]) > after then redis.call('HSET', KEYS[1], 'after', ARGV[1]) end
redis.call('HSET', KEYS[1], 'last_due', ARGV[1], 'last_crawlid', ARGV[2], 'last_fired', ARGV[3], 'last_late', ARGV[4],
           'last_outcome', ARGV[5])
redis.call('HDEL', KEYS[1], 'pending', 'pending_crawlid')
redis.call('LPUSH', KEYS[2], ARGV[7])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[6]) - 1)
return 1

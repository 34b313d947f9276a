-- Skip a schedule's due times that are older than the grace period (master/schedules.py), fenced like staging:
-- `after` moves up to the last of them, which are counted as missed and said so in the history.
-- KEYS: epoch, schedule hash, history. ARGV: epoch, last skipped due time, how many, history cap, history entry.
-- Reply: 1 skipped, 0 not to skip (gone, a firing pending, or past them already).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('HEXISTS', KEYS[2], 'pending') == 1 then return 0 end
local after = tonumber(redis.call('HGET', KEYS[2], 'after') or '0') or 0
if tonumber(ARGV[2]) <= after then return 0 end
redis.call('HSET', KEYS[2], 'after', ARGV[2], 'last_missed', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'missed', ARGV[3])
redis.call('LPUSH', KEYS[3], ARGV[5])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[4]) - 1)
return 1

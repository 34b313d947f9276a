-- Claim a due notification for one delivery attempt (messaging/notify.py): a sender holds it until ARGV[3], so that
-- two masters (a leader and a stale one, during a failover) never post the same event at once. A notification that
-- is no longer pending leaves the due set. now_seconds.lua is prepended.
-- KEYS: due zset, event hash. ARGV: now (or ''), event id, held until. Reply: {url, body, attempts} or nil.
local state = redis.call('HGET', KEYS[2], 'state')
if state ~= 'pending' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return nil
end
local claimed = tonumber(redis.call('HGET', KEYS[2], 'claimed') or '0') or 0
if claimed > now then return nil end
redis.call('HSET', KEYS[2], 'claimed', ARGV[3])
return redis.call('HMGET', KEYS[2], 'url', 'body', 'attempts')

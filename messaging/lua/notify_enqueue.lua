-- Enqueue a notification (messaging/notify.py) once: an event id seen before (pending, delivered or given up, until
-- its record expires) is never enqueued again, so a master that announces a crawl's end twice (it died between the
-- two) or two leaders that both see a stall never make a second delivery. now_seconds.lua is prepended.
-- KEYS: due zset, event hash. ARGV: now (or ''), event id, url, body (JSON). Reply: 1 enqueued, 0 known already.
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'state', 'pending', 'url', ARGV[3], 'body', ARGV[4], 'attempts', '0',
           'created', tostring(now))
redis.call('ZADD', KEYS[1], now, ARGV[2])
return 1

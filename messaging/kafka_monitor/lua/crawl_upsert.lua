-- Store a crawl request's rule and limits in crawl:<id> (messaging/kafka_monitor/plugins/crawl.py), unless the
-- crawl is stopped: refused atomically with the write, so that a stop that lands meanwhile is never undone. A
-- paused crawl stays paused (its new task waits parked until it is resumed); any other crawl is running.
-- KEYS[1]: crawl:<id>. ARGV: state field, stopped, running, created field, url field, start url, paused, then
-- field/value pairs. Returns 0 when the crawl is stopped (nothing written), 1 otherwise.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if state == ARGV[2] then return 0 end
if state ~= ARGV[7] then state = ARGV[3] end
local t = redis.call('TIME')
redis.call('HSETNX', KEYS[1], ARGV[4], t[1])
redis.call('HSETNX', KEYS[1], ARGV[5], ARGV[6])
redis.call('HSET', KEYS[1], ARGV[1], state, unpack(ARGV, 8))
redis.call('PERSIST', KEYS[1])
return 1

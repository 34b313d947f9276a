-- Declare a crawl finished, once (master/finisher.py): running -> finished, with the finish time, and the
-- crawl_finished event marked pending in the same call.
-- KEYS: crawl hash. ARGV: now, state field, running, finished, finished-time field, event field.
-- Reply: 1 when this call finished the crawl.
if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4], ARGV[5], ARGV[1], ARGV[6], 'pending')
return 1

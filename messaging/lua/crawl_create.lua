-- Create a crawl of one's own spider unless it exists (messaging/own_crawls.py): workers that race to begin the same
-- crawl all find the same record; an existing record is never changed here (its spider, arguments and version
-- were pinned by whoever made it: the manager's schedule.json, a Kafka crawl request, the first worker).
-- KEYS[1] crawl:<id>, KEYS[2] the set of crawls. ARGV: the crawl id, then field/value pairs (the state running
-- among them). Reply: 1 created, 0 it existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'created', t[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1

-- Forget a crawl's revisit schedule (master/revisits.py: the crawl was stopped, finished, or its `until` passed),
-- fenced by the leader's epoch. Revisit tasks already out complete as usual and find no state to update.
-- KEYS: epoch, revisit crawls, due, out, state, stats. ARGV: epoch, crawlid. Reply: URLs forgotten.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
local urls = redis.call('HLEN', KEYS[5])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('SREM', KEYS[2], ARGV[2])
return urls

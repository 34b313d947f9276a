-- Who turns a crawl's start() into tasks (spiders/worker/start.py): once per crawl, not once per worker.
-- The claim is a lease: its holder renews it while it pushes; if it dies, the claim expires and the next worker
-- that asks takes over and runs start() again (what was pushed already is deduplicated). The first claim puts one
-- pending count on the crawl (pending:{seeds}), so that the crawl cannot finish while its start requests are
-- still coming; `done` (start_done.lua) takes it away.
-- KEYS[1] start:{seeds}:<crawlid>, KEYS[2] pending:{seeds}. ARGV: crawlid, job, claim length (microseconds).
-- Reply: {'done'} | {'mine'} | {'wait', owner, microseconds left}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local claim = redis.call('HMGET', KEYS[1], 'done', 'owner', 'until', 'phantom')
if claim[1] then return {'done'} end
local owner, deadline = claim[2], tonumber(claim[3] or '0')
if owner and owner ~= ARGV[2] and deadline > now then
  return {'wait', owner, tostring(deadline - now)}
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'until', tostring(now + tonumber(ARGV[3])))
if not claim[4] then
  redis.call('HSET', KEYS[1], 'phantom', '1')
  redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
end
return {'mine'}

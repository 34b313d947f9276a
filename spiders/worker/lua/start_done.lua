-- A crawl's start requests are all in seeds (spiders/worker/start.py): the claim is marked done, for good, and its
-- pending count goes; a crawl left with nothing pending becomes a finish candidate (as the dispatcher's settle step
-- makes it). Only the claim's holder may say so (a holder whose claim expired and was taken over may not).
-- KEYS[1] start:{seeds}:<crawlid>, KEYS[2] pending:{seeds}, KEYS[3] finish:{seeds}:candidates. ARGV: crawlid, job.
-- Reply: 1 done now, 0 not the holder (or done already).
local claim = redis.call('HMGET', KEYS[1], 'done', 'owner', 'phantom')
if claim[1] or claim[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'done', '1')
if claim[3] then
  redis.call('HDEL', KEYS[1], 'phantom')
  if pending_sub(KEYS[2], ARGV[1], 1) then redis.call('SADD', KEYS[3], ARGV[1]) end
end
return 1

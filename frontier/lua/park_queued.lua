-- A worker parks what its queue of one domain holds of paused crawls (frontier/client/parking.py): those tasks move
-- into the job's parked tasks at their queue score, still counted in the domain's pending count (a task parked
-- already is merged, its second count taken back).
-- KEYS[1] <job>:{d}:queue  KEYS[2] <job>:{d}:parked  KEYS[3] pending:{d}
-- ARGV: (needle, crawlid)* (crawl_of.lua). Reply: the tasks parked.
local moved = 0
local queued = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #queued, 2 do
  for j = 1, #ARGV, 2 do
    if of_crawl(queued[i], ARGV[j]) then
      redis.call('ZREM', KEYS[1], queued[i])
      if redis.call('ZADD', KEYS[2], queued[i + 1], queued[i]) == 0 then pending_sub(KEYS[3], ARGV[j + 1], 1) end
      moved = moved + 1
      break
    end
  end
end
return moved

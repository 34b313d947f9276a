-- A resumed crawl's parked tasks of one domain go back into the job's queue at their old score
-- (frontier/client/parking.py); a task queued already is merged, its second count taken back. The caller adds the
-- domain to the job's ready index once this returned (the index's invariant, frontier/client/ready.py).
-- KEYS[1] <job>:{d}:parked  KEYS[2] <job>:{d}:queue  KEYS[3] pending:{d}
-- ARGV[1] needle (crawl_of.lua)  ARGV[2] crawlid. Reply: the tasks back in the queue.
local moved = 0
local parked = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #parked, 2 do
  if of_crawl(parked[i], ARGV[1]) then
    redis.call('ZREM', KEYS[1], parked[i])
    if redis.call('ZADD', KEYS[2], 'NX', parked[i + 1], parked[i]) == 0 then
      pending_sub(KEYS[3], ARGV[2], 1)
    else
      moved = moved + 1
    end
  end
end
return moved

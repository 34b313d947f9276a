-- Complete leased tasks of one domain: acknowledge each lease and take the task out of its crawl's pending count
-- of the domain, in one atomic step (docs/architecture.md, "complete"). A crash can therefore never leave a task
-- acknowledged but still counted as pending, which would keep its crawl from ever finishing. A lease that is no
-- longer held (expired and requeued, purged by a stop, or moved back to seeds because the job was retired) is
-- refused and changes nothing: whoever holds the task now completes it.
--
-- KEYS[1] <job>:{d}:inflight   KEYS[2] <job>:{d}:leasescores   KEYS[3] pending:{d}
-- ARGV: (task, crawlid)* pairs
-- Reply: the tasks whose lease was acknowledged now.
local done = {}
for i = 1, #ARGV, 2 do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[2], ARGV[i])
    pending_sub(KEYS[3], ARGV[i + 1], 1)
    done[#done + 1] = ARGV[i]
  end
end
return done

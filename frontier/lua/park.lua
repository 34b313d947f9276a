-- A worker hands back leases of a paused crawl (frontier/client/parking.py): each leased task moves from the job's
-- leases into its parked tasks at its queue score, still counted in the domain's pending count, and the hit its
-- request would have spent is withdrawn from both throttle windows (it never went out). A lease no longer held
-- (expired and put back, purged) is not parked: whoever holds the task now parks it. A task parked already (the same
-- member) is merged: it was counted twice, once is taken back.
-- KEYS[1] <job>:{d}:inflight  KEYS[2] <job>:{d}:leasescores  KEYS[3] <job>:{d}:parked  KEYS[4] pending:{d}
-- KEYS[5] <spider_type>:{d}:throttle  KEYS[6] <ip>:{d}:throttle  KEYS[7] <spider_type>:{d}:pace  KEYS[8] <ip>:{d}:pace
-- (a withdrawn hit may empty a window, which deletes it: its bucket forgets `until`, so the next hit sets both
-- expiries again, pace.lua)
-- ARGV: (task, crawlid, hit or '')*. Reply: the tasks parked.
local parked = {}
for i = 1, #ARGV, 3 do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    local score = redis.call('HGET', KEYS[2], ARGV[i]) or 0
    redis.call('HDEL', KEYS[2], ARGV[i])
    if redis.call('ZADD', KEYS[3], score, ARGV[i]) == 0 then pending_sub(KEYS[4], ARGV[i + 1], 1) end
    parked[#parked + 1] = ARGV[i]
  end
  if ARGV[i + 2] ~= '' then
    redis.call('ZREM', KEYS[5], ARGV[i + 2])
    redis.call('ZREM', KEYS[6], ARGV[i + 2])
    redis.call('HDEL', KEYS[7], 'until')
    redis.call('HDEL', KEYS[8], 'until')
  end
end
return parked

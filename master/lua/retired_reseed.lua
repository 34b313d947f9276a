-- Requeue of a retired job, step 2 (master.requeue): the outbox's tasks into seeds, once (the marker), by priority
-- as newly arrived (seeds_score, prepended), each new one counted in pending:{seeds}.
-- KEYS: seeds, seeds sequence, pending:{seeds}, marker, epoch. ARGV: epoch, ttl, (task, priority, crawlid)*.
-- Reply: tasks added to seeds; -1 when already done.
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
if not redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[2]) then return -1 end
local n = (#ARGV - 2) / 3
local last = redis.call('INCRBY', KEYS[2], n)
local added = 0
for i = 0, n - 1 do
  local base = 3 + 3 * i
  if redis.call('ZADD', KEYS[1], 'NX', seeds_score(ARGV[base + 1], last - n + 1 + i), ARGV[base]) == 1 then
    added = added + 1
    redis.call('HINCRBY', KEYS[3], ARGV[base + 2], 1)
  end
end
return added

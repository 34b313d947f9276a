-- Step 2 of a dispatch batch (master/staging.py), in one domain's slot: claim the batch's landing marker of the
-- domain and, only if the claim succeeds, add the tasks to their queues and count them in pending:{d}.
-- KEYS: marker, pending:{d}, queue*. ARGV: ttl, (queue index, queue score, task, crawlid)*.
-- Reply: {tasks added, tasks added to queue 1, queue 2, ...} (the per-queue counts feed the jobs' ready indexes,
-- frontier/client/ready.py), {0} when this batch had landed already, or -1 when the marker was revoked (the batch goes
-- back to seeds).
if not redis.call('SET', KEYS[1], 'landed', 'NX', 'EX', ARGV[1]) then
  if redis.call('GET', KEYS[1]) == 'landed' then return {0} end
  return -1
end
local added, per_crawl, per_queue = 0, {}, {}
for i = 3, #KEYS do per_queue[i - 2] = 0 end
for i = 2, #ARGV, 4 do
  local q = tonumber(ARGV[i])
  if redis.call('ZADD', KEYS[2 + q], 'NX', ARGV[i + 1], ARGV[i + 2]) == 1 then
    added = added + 1
    per_queue[q] = per_queue[q] + 1
    per_crawl[ARGV[i + 3]] = (per_crawl[ARGV[i + 3]] or 0) + 1
  end
end
for crawl, n in pairs(per_crawl) do redis.call('HINCRBY', KEYS[2], crawl, n) end
table.insert(per_queue, 1, added)
return per_queue

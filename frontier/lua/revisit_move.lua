-- Move a crawl's due URLs back to seeds as revisit tasks (master/revisits.py), in the slot of seeds; the seeds score
-- snippet is prepended. Fenced like staging: only the leader of the current epoch writes. A URL moves only while it
-- is still due and at the generation the caller read, so two movers never push one revisit twice; it leaves `due`
-- for `out` (scored by when it was due) and its state records the new generation, which its task carries.
-- KEYS: epoch, seeds, seeds sequence, pending:{seeds}, due, out, state.
-- ARGV: epoch, crawlid, then (url, generation, task, priority)*. Reply: the tasks pushed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
local n = (#ARGV - 2) / 4
local last = redis.call('INCRBY', KEYS[3], n)
local moved = 0
for i = 0, n - 1 do
  local url, gen, task, priority = ARGV[3 + 4 * i], tonumber(ARGV[4 + 4 * i]), ARGV[5 + 4 * i], ARGV[6 + 4 * i]
  local score = redis.call('ZSCORE', KEYS[5], url)
  local raw = redis.call('HGET', KEYS[7], url)
  if score and raw then
    local s = cjson.decode(raw)
    if s.gen + 1 == gen then
      s.gen = gen
      redis.call('HSET', KEYS[7], url, cjson.encode(s))
      redis.call('ZREM', KEYS[5], url)
      redis.call('ZADD', KEYS[6], score, url)
      if redis.call('ZADD', KEYS[2], 'NX', seeds_score(priority, last - n + 1 + i), task) == 1 then
        redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
      end
      moved = moved + 1
    end
  end
end
return moved

-- Put tasks into seeds (messaging.tasks.push_seeds), counting each new one in its crawl's pending:{seeds} entry.
-- KEYS: seeds, seeds sequence, per-crawl pending counts, then (when guarded) one guard key per task — all in the
-- hash slot of `seeds`. ARGV: guard TTL, then (member, priority, crawlid) per task.
-- Per task: 1 new in seeds, 0 already there, -1 its guard key was set already (a redelivered request).
local n = (#ARGV - 1) / 3
local guarded = #KEYS > 3
local last = redis.call('INCRBY', KEYS[2], n)
local out = {}
for i = 0, n - 1 do
  local code = -1
  if not guarded or redis.call('SET', KEYS[4 + i], '1', 'NX', 'EX', ARGV[1]) then
    code = redis.call('ZADD', KEYS[1], 'NX', seeds_score(ARGV[3 * i + 3], last - n + 1 + i), ARGV[3 * i + 2])
    if code == 1 then redis.call('HINCRBY', KEYS[3], ARGV[3 * i + 4], 1) end
  end
  out[#out + 1] = code
end
return out

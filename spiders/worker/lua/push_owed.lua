-- Push a commit's owed children into seeds (spiders/worker/journal.py, step 4), each page's only if its journal entry
-- is still there — deleted in the same call. A commit retried after its push, or a call the client sent twice,
-- therefore pushes nothing twice, and an entry is gone exactly when its children are in seeds. seeds_score is
-- prepended; every key is in the slot of seeds.
--
-- KEYS: seeds, seeds sequence, pending:{seeds}, then the journal entries of the pages (children:{seeds}:journal:…)
-- ARGV: (entry index, member, priority, crawlid)* — the index (1-based) names KEYS[3 + index]
-- Reply: tasks new in seeds.
local open = {}
for i = 4, #KEYS do open[i - 3] = redis.call('DEL', KEYS[i]) == 1 end
local n = #ARGV / 4
local last = redis.call('INCRBY', KEYS[2], n)
local pushed = 0
for i = 0, n - 1 do
  local at = 4 * i + 1
  if open[tonumber(ARGV[at])] and
      redis.call('ZADD', KEYS[1], 'NX', seeds_score(ARGV[at + 2], last - n + 1 + i), ARGV[at + 1]) == 1 then
    redis.call('HINCRBY', KEYS[3], ARGV[at + 3], 1)
    pushed = pushed + 1
  end
end
return pushed

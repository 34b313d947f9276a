-- Importance ordering (spiders/worker/importance.py): each link adds to its URL's score 1 (one more page linking to
-- it) plus the linking page's own score shared among its links (a page linked from important pages is important:
-- one step of PageRank, as OPIC computes it on line); new URLs go into seeds with a priority raised by their score,
-- and URLs already waiting in seeds rise when their score grows (a link the Bloom filter drops still counts).
-- seeds_score is prepended with DEFAULT_PRIORITY and LEVEL_STEP; every key is in the slot of seeds.
-- KEYS: seeds, seeds sequence, pending:{seeds}, then per crawl its score hash and its members hash, then e journal
-- entries of the pushing pages (children:{seeds}:journal:…).
-- ARGV: ttl ms, links n, (crawl index, fingerprint, linking page's fingerprint, its links)*n,
-- pushes p, (crawl index, fingerprint, task, priority, crawlid, entry index)*p, e.
-- A crawl index i (1-based) names KEYS[2 + 2i] and KEYS[3 + 2i]; an entry index k (1-based) the k-th journal
-- entry, and a push is made only if that entry was still there (deleted here, as push_owed.lua does: a commit
-- retried after its push pushes nothing twice); entry index 0: no entry. Reply: {pushed new in seeds, scores raised}.
local function level(score)  -- 0 for no link, LEVEL_STEP for one, then logarithmic (hubs do not hit the cap soon)
  return math.floor(LEVEL_STEP * math.log(1 + score) / math.log(2))
end
local ttl = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local touched = {}
local counts = {}
for i = 0, n - 1 do
  local at = 3 + 4 * i
  local c, fp, parent, links = tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3])
  local scores = KEYS[2 + 2 * c]
  local share = tonumber(redis.call('HGET', scores, parent) or '0') / math.max(links, 1)
  counts[c .. ' ' .. fp] = tonumber(redis.call('HINCRBYFLOAT', scores, fp, 1 + share))
  touched[c] = true
end
local base = 3 + 4 * n
local p = tonumber(ARGV[base])
local entries = tonumber(ARGV[#ARGV])
local open = {[0] = true}
for k = 1, entries do open[k] = redis.call('DEL', KEYS[#KEYS - entries + k]) == 1 end
local last = redis.call('INCRBY', KEYS[2], p)
local pushed, pushing = 0, {}
for i = 0, p - 1 do
  local at = base + 1 + 6 * i
  local c, fp, task, crawl = tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2], ARGV[at + 4]
  if open[tonumber(ARGV[at + 5])] then
    local count = counts[c .. ' ' .. fp] or tonumber(redis.call('HGET', KEYS[2 + 2 * c], fp) or '0')
    local priority = math.min(MAX_PRIORITY, tonumber(ARGV[at + 3]) + level(count))
    if redis.call('ZADD', KEYS[1], 'NX', seeds_score(priority, last - p + 1 + i), task) == 1 then
      redis.call('HINCRBY', KEYS[3], crawl, 1)
      pushed = pushed + 1
    end
    redis.call('HSET', KEYS[3 + 2 * c], fp, task)
    pushing[c .. ' ' .. fp] = true
    touched[c] = true
  end
end
local raised = 0
for key, count in pairs(counts) do
  if not pushing[key] then
    local c, fp = string.match(key, '^(%d+) (.*)$')
    c = tonumber(c)
    local task = redis.call('HGET', KEYS[3 + 2 * c], fp)
    local score = task and redis.call('ZSCORE', KEYS[1], task)
    if score then
      local ok, decoded = pcall(cjson.decode, task)
      local priority = math.min(MAX_PRIORITY, ((ok and decoded.priority) or DEFAULT_PRIORITY) + level(count))
      local raised_score = seeds_score(priority, tonumber(score) % ARRIVAL_SPAN)
      if tonumber(raised_score) < tonumber(score) then
        redis.call('ZADD', KEYS[1], 'XX', raised_score, task)
        raised = raised + 1
      end
    end
  end
end
for c in pairs(touched) do
  redis.call('PEXPIRE', KEYS[2 + 2 * c], ttl)
  redis.call('PEXPIRE', KEYS[3 + 2 * c], ttl)
end
return {pushed, raised}

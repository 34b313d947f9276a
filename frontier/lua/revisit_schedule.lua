-- Record a batch of fetched revisitable pages in their crawls' revisit schedules (frontier/revisit.py,
-- Schedule.record), all in the slot of seeds; `now` (messaging/lua/now_seconds.lua) and INC_RATE / DEC_RATE are
-- prepended. A first fetch (no generation) schedules a URL that is not scheduled yet; a revisit of generation g
-- counts only if g is the URL's current generation and was not counted before (a task re-delivered after a crash
-- changes nothing twice). Then the interval adapts (frontier/revisit.py: next_interval) and the URL is due again.
-- KEYS[1]: revisit crawls; then per crawl: due, out, state, stats.
-- ARGV[1]: now or ''; ARGV[2]: crawls; per crawl: crawlid, interval, min, max, entries; per entry: url, generation
-- ('' = first fetch), outcome (fetched | changed | unchanged | not_modified | failed), etag, last_modified, digest,
-- task. Reply: per entry, what was done (scheduled | an outcome | skipped).
local function adapt(interval, outcome, low, high)
  if outcome == 'changed' then
    interval = (1 - DEC_RATE) * interval + DEC_RATE * low
  elseif outcome == 'unchanged' or outcome == 'not_modified' then
    interval = interval * (1 + INC_RATE)
  end
  if interval < low then interval = low end
  if interval > high then interval = high end
  return interval
end

local reply = {}
local a = 3
for c = 0, tonumber(ARGV[2]) - 1 do
  local due, out, state, stats = KEYS[2 + 4 * c], KEYS[3 + 4 * c], KEYS[4 + 4 * c], KEYS[5 + 4 * c]
  local crawlid, base, low, high = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local n = tonumber(ARGV[a + 4])
  a = a + 5
  for _ = 1, n do
    local url, gen, outcome = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local etag, modified, digest, task = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
    a = a + 7
    local raw = redis.call('HGET', state, url)
    local done = 'skipped'
    if gen == '' then
      if not raw and outcome ~= 'failed' then
        redis.call('HSET', state, url, cjson.encode({interval = base, gen = 0, done = 0, etag = etag,
                                                     modified = modified, digest = digest, task = task}))
        redis.call('ZADD', due, now + base, url)
        redis.call('HINCRBY', stats, 'urls', 1)
        redis.call('HINCRBYFLOAT', stats, 'interval_sum', base)
        redis.call('SADD', KEYS[1], crawlid)
        done = 'scheduled'
      end
    elseif raw then
      local s = cjson.decode(raw)
      local g = tonumber(gen)
      if s.gen == g and s.done ~= g then
        local old = s.interval
        s.interval = adapt(old, outcome, low, high)
        s.previous, s.outcome, s.done = old, outcome, g
        if outcome == 'changed' or outcome == 'unchanged' then  -- a full response: its validators now
          s.etag, s.modified = etag, modified
        end
        if outcome == 'changed' then s.digest = digest end
        redis.call('HSET', state, url, cjson.encode(s))
        redis.call('ZREM', out, url)
        redis.call('ZADD', due, now + s.interval, url)
        redis.call('HINCRBYFLOAT', stats, 'interval_sum', s.interval - old)
        redis.call('HINCRBY', stats, outcome, 1)
        if outcome == 'not_modified' then redis.call('HINCRBY', stats, 'unchanged', 1) end
        done = outcome
      end
    end
    reply[#reply + 1] = done
  end
end
return reply

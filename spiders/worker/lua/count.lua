-- Count a crawl's pages and items once per canonical URL: the first processing of a page counts it, later ones are
-- "restored" (a re-fetch after a fault: a lease that expired, a worker retired, a Redis restart that lost a
-- second of writes) or "retried" (the first processing of `crawlfleet retry` number n of the URL). One call per
-- crawl; both keys share the crawl's hash tag, so a page and the totals always change together.
--
-- KEYS[1] crawl:{<id>}:counted, KEYS[2] crawl:{<id>}:totals (messaging.keys).
-- ARGV[1]: the failures list's bound (CRAWLFLEET_FAILURES_MAX), then
-- (fingerprint, items stored, failure reason or '', '1' for the start URL, '1' if a failure of this reason is
--  listed, retry number or '0')*.
-- A page's field holds what it counts as now: its items, or '<kind>:<reason>' while it fails — kind 'l' (kept in
-- the failures list), 'u' (beyond the list's bound: counted in `unlisted`) or 'f' (not a failure to list: robots,
-- blacklisted, noindex, a request that could not travel) — with '#<n>' when retry n processed it last. The items an
-- errback of one's own spider stored for a failed page count all the same (0 for a rule spider's). A failed page
-- that is processed again and works stops being a failure and counts its items then; one that fails again counts
-- under its new reason; a page stored with no items whose re-processing stored some counts them then (its first
-- store of items).
-- Reply: {pages, items, restored, retried} added by this call (the caller mirrors pages and items into
-- crawl:<id>), then one verdict per page for the failures list: 'keep' (write its entry), 'drop' (delete it), ''.
local counted, totals = KEYS[1], KEYS[2]
local bound = tonumber(ARGV[1])
local pages, items, restored, retried = 0, 0, 0, 0
local verdicts = {}
local listed = tonumber(redis.call('HGET', totals, 'listed') or '0')

local function parse(value)
  local body, gen = string.match(value, '^(.*)#(%d+)$')
  if not body then body, gen = value, '0' end
  local kind, reason = string.match(body, '^([luf]):(.*)$')
  return kind, reason, tonumber(body), tonumber(gen)
end

local function add(field, n)
  if redis.call('HINCRBY', totals, field, n) <= 0 then redis.call('HDEL', totals, field) end
end

local function new_failure(reason, listable)
  redis.call('HINCRBY', totals, 'failed:' .. reason, 1)
  if listable ~= '1' then return 'f', '' end
  if listed < bound then
    listed = listed + 1
    redis.call('HINCRBY', totals, 'listed', 1)
    return 'l', 'keep'
  end
  redis.call('HINCRBY', totals, 'unlisted', 1)
  return 'u', ''
end

for i = 2, #ARGV, 6 do
  local fp, n, reason, start = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3] == '1'
  local listable, gen = ARGV[i + 4], tonumber(ARGV[i + 5])
  local prev = redis.call('HGET', counted, fp)
  local record, verdict = nil, ''
  if not prev then
    pages = pages + 1
    if reason ~= '' then
      local kind
      kind, verdict = new_failure(reason, listable)
      record = kind .. ':' .. reason
      items = items + n  -- what an errback of one's own spider stored for the failed page
      if start then redis.call('HSET', totals, 'start', reason) end
    else
      record = tostring(n)
      items = items + n
    end
  else
    local kind, was, stored, last = parse(prev)
    if gen > last then retried = retried + 1 else restored = restored + 1 end
    if kind and reason == '' then  -- it failed, now it works: out of the failures, its items counted
      add('failed:' .. was, -1)
      if kind == 'l' then
        add('listed', -1)
        listed = listed - 1
      elseif kind == 'u' then
        add('unlisted', -1)
      end
      if start then redis.call('HDEL', totals, 'start') end
      record = tostring(n)
      items = items + n
      verdict = 'drop'
    elseif kind then  -- it failed and fails again, perhaps for another reason
      if reason ~= was then
        add('failed:' .. was, -1)
        redis.call('HINCRBY', totals, 'failed:' .. reason, 1)
        if start then redis.call('HSET', totals, 'start', reason) end
      end
      record = kind .. ':' .. reason
      if kind == 'l' then verdict = 'keep' end
    elseif reason == '' and stored == 0 and n > 0 then
      record = tostring(n)
      items = items + n
    end
    if record == nil and gen > last then record = tostring(stored) end  -- remember that this retry counted
    if gen < last then gen = last end
  end
  if record ~= nil then
    if gen > 0 then record = record .. '#' .. gen end
    redis.call('HSET', counted, fp, record)
  end
  verdicts[#verdicts + 1] = verdict
end
redis.call('HINCRBY', totals, 'pages', pages)
redis.call('HINCRBY', totals, 'items', items)
if restored > 0 then redis.call('HINCRBY', totals, 'restored', restored) end
if retried > 0 then redis.call('HINCRBY', totals, 'retried', retried) end
local reply = {pages, items, restored, retried}
for _, verdict in ipairs(verdicts) do reply[#reply + 1] = verdict end
return reply

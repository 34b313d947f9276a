-- Count a crawl's pages and items once per canonical URL: the first processing of a page counts it, later ones are
-- "restored" (a re-fetch after a fault: a lease that expired, a worker retired, a Redis restart that lost a
-- second of writes). One call per crawl; both keys share the crawl's hash tag, so a page and the totals always
-- change together.
--
-- KEYS[1] crawl:{<id>}:counted, KEYS[2] crawl:{<id>}:totals (messaging.keys).
-- ARGV: (fingerprint, items stored, failure reason or '', '1' for the start URL)*.
-- A page's field holds what its first processing counted: its items, or 'f:<reason>' when it failed (the items an
-- errback of one's own spider stored for it count all the same). A failed page
-- that is processed again and works stops being a failure and counts its items then; a page stored with no items
-- whose re-processing stored some counts them then (its first store of items).
-- Reply: {pages, items, restored} added by this call (the caller mirrors them into crawl:<id>).
local counted, totals = KEYS[1], KEYS[2]
local pages, items, restored = 0, 0, 0
for i = 1, #ARGV, 4 do
  local fp, n, reason, start = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3] == '1'
  local prev = redis.call('HGET', counted, fp)
  if not prev then
    pages = pages + 1
    if reason ~= '' then
      redis.call('HSET', counted, fp, 'f:' .. reason)
      redis.call('HINCRBY', totals, 'failed:' .. reason, 1)
      items = items + n  -- what an errback of one's own spider stored for the failed page (0 for a rule spider)
      if start then redis.call('HSET', totals, 'start', reason) end
    else
      redis.call('HSET', counted, fp, n)
      items = items + n
    end
  else
    restored = restored + 1
    if reason == '' then
      if string.sub(prev, 1, 2) == 'f:' then
        local failed = 'failed:' .. string.sub(prev, 3)
        if redis.call('HINCRBY', totals, failed, -1) <= 0 then redis.call('HDEL', totals, failed) end
        if start then redis.call('HDEL', totals, 'start') end
        redis.call('HSET', counted, fp, n)
        items = items + n
      elseif tonumber(prev) == 0 and n > 0 then
        redis.call('HSET', counted, fp, n)
        items = items + n
      end
    end
  end
end
redis.call('HINCRBY', totals, 'pages', pages)
redis.call('HINCRBY', totals, 'items', items)
if restored > 0 then redis.call('HINCRBY', totals, 'restored', restored) end
return {pages, items, restored}

-- Admit a crawl's new children within its limits (max_pages, domain_max_pages), atomically on crawl:<id>.
--
-- KEYS[1] crawl:<id>. ARGV: max pages ('' = none), max pages per domain ('' = none), the start URL's domain,
-- then (domain, wanted)*. Reply: how many children of each domain are admitted, in order.
local max_total = tonumber(ARGV[1])
local max_domain = tonumber(ARGV[2])
local total = tonumber(redis.call('HGET', KEYS[1], 'enqueued') or '1')
local out = {}
for i = 4, #ARGV, 2 do
  local allowed = tonumber(ARGV[i + 1])
  if max_total then allowed = math.min(allowed, max_total - total) end
  if max_domain then
    local field = 'enqueued:' .. ARGV[i]
    local start = (ARGV[i] == ARGV[3]) and 1 or 0
    local used = tonumber(redis.call('HGET', KEYS[1], field) or start)
    allowed = math.min(allowed, max_domain - used)
    if allowed > 0 then redis.call('HSET', KEYS[1], field, used + allowed) end
  end
  if allowed < 0 then allowed = 0 end
  total = total + allowed
  out[#out + 1] = allowed
end
redis.call('HSET', KEYS[1], 'enqueued', total)
return out

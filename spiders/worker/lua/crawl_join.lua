-- Which crawl a worker of a spider type joins when it was started without a crawl id (spiders/worker/own.py):
-- compare-and-set of spidercrawl:<type>. The caller read the current crawl and found it ended (or none):
-- it proposes a new id, which replaces the value only if it is still the one the caller read.
-- KEYS[1] spidercrawl:<type>. ARGV: the value read ('' for none), the proposed crawl id.
-- Reply: the crawl to join (the proposal, or what another worker set meanwhile).
local current = redis.call('GET', KEYS[1]) or ''
if current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return ARGV[2]
end
return current

-- The finisher's poll (master/finisher.py), one atomic call in the slot of seeds: take the whole change log (the
-- (domain, crawl) pairs whose pending counts changed, frontier/finish_hints.py), and read some finish candidates
-- with their seeds counts at the same instant (dropping those whose count is above zero). Every landing settled
-- before this call is in the log taken now or in an earlier one; a landing not yet settled keeps its crawl's seeds
-- count above zero.
-- KEYS: finish touched, finish candidates, pending:{seeds}. ARGV: candidates to read at most.
-- Reply: {touched members, candidates, their seeds counts}.
local touched = redis.call('SMEMBERS', KEYS[1])
if #touched > 0 then redis.call('DEL', KEYS[1]) end
local candidates = redis.call('SRANDMEMBER', KEYS[2], tonumber(ARGV[1]))
local counts = {}
for i, crawl in ipairs(candidates) do
  counts[i] = tonumber(redis.call('HGET', KEYS[3], crawl) or '0')
  -- Work in seeds again: no longer a candidate. Here, in the same call as the read: the settle step adds the crawl
  -- back when the count next drops to zero, and a removal made after this call could undo that addition for good.
  if counts[i] > 0 then redis.call('SREM', KEYS[2], crawl) end
end
return {touched, candidates, counts}

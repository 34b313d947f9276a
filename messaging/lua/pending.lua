-- A crawl's pending count of one hash slot (master/finisher.py): pending:{seeds} or pending:{<domain>}, a hash
-- crawlid -> tasks. Prepended to every script that takes tasks out of a count (complete.lua, the registry's done.lua,
-- retired_release.lua, settle.lua, dead_letter.lua, and the parking scripts of paused crawls, which merge a task
-- that was counted twice). The entry goes when it reaches zero, so an empty hash means
-- nothing is pending there; returns true when it did (the caller may make the crawl a finish candidate).
local function pending_sub(key, crawl, n)
  if redis.call('HINCRBY', key, crawl, -n) <= 0 then
    redis.call('HDEL', key, crawl)
    return true
  end
  return false
end

-- Park a paused crawl's tasks that wait in seeds (messaging.pause): each moves into parked:{seeds}:<id> at its seeds
-- score, still counted in pending:{seeds}. Only while the crawl is paused (crawls:{seeds}:paused, same slot), so a
-- resume that ran meanwhile is never undone; with a time in ARGV[2] the crawl is marked paused first (the pause
-- itself). A task already parked (the same member) is merged: it was counted twice, once is taken back.
-- KEYS: crawls:{seeds}:paused, seeds, parked:{seeds}:<id>, pending:{seeds}. ARGV: crawlid, since ('' = only if
-- paused), then members. Reply: the tasks parked, or -1 when the crawl is not paused.
if ARGV[2] ~= '' then
  redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
elseif redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local moved = 0
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if score then
    redis.call('ZREM', KEYS[2], ARGV[i])
    if redis.call('ZADD', KEYS[3], score, ARGV[i]) == 0 then pending_sub(KEYS[4], ARGV[1], 1) end
    moved = moved + 1
  end
end
return moved

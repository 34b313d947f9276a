-- A task that cannot be placed leaves seeds (master.staging.Staging.dead_letter): out of its crawl's pending count
-- (a crawl whose count reaches zero becomes a finish candidate), counted per crawl, its record kept in a capped list
-- and in the outbox produced to crawlfleet.failed.
-- KEYS: seeds, epoch, pending:{seeds}, finish candidates, dead letters, dead-letter counts, dead-letter outbox.
-- ARGV: epoch, cap, (task, crawlid, record)*. Reply: tasks moved (those still in seeds).
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
local cap = tonumber(ARGV[2])
local moved = 0
for i = 3, #ARGV, 3 do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    moved = moved + 1
    local crawl = ARGV[i + 1]
    if crawl ~= '' then
      if pending_sub(KEYS[3], crawl, 1) then redis.call('SADD', KEYS[4], crawl) end
      redis.call('HINCRBY', KEYS[6], crawl, 1)
    end
    redis.call('LPUSH', KEYS[5], ARGV[i + 2])
    redis.call('RPUSH', KEYS[7], ARGV[i + 2])
  end
end
if moved > 0 then
  redis.call('LTRIM', KEYS[5], 0, cap - 1)
  redis.call('LTRIM', KEYS[7], -cap, -1)
end
return moved

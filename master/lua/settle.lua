-- Dispatch step 3, settle (master.staging): once per batch (guarded by deleting it from the staging hash), tasks of
-- revoked domains go back into seeds at their old score, landed tasks leave pending:{seeds} (a crawl whose count
-- reaches zero becomes a finish candidate) and count in their spider type's dispatched-per-minute windows. The
-- (domain, crawl) pairs that landed go into the finisher's change log in the same call (frontier/finish_hints.py):
-- a crawl's seeds count never reads zero before the finisher can know where its tasks went.
-- KEYS: seeds, staging hash, pending:{seeds}, finish candidates, staging epochs, finish touched, then per spider
-- type its dispatched-minute hash and its dispatched-per-job hash.
-- ARGV: batch, epoch, minute, returned count r, (task, score)*r, crawl count c, (crawlid, n)*c, pair count p,
-- touched member*p, (type index, job, n)*.
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then return 0 end
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], ARGV[i])
  i = i + 2
end
local crawls = tonumber(ARGV[i])
i = i + 1
for _ = 1, crawls do
  if pending_sub(KEYS[3], ARGV[i], tonumber(ARGV[i + 1])) then redis.call('SADD', KEYS[4], ARGV[i]) end
  i = i + 2
end
local pairs_count = tonumber(ARGV[i])
i = i + 1
for j = i, i + pairs_count - 1, 500 do
  redis.call('SADD', KEYS[6], unpack(ARGV, j, math.min(j + 499, i + pairs_count - 1)))
end
i = i + pairs_count
while i <= #ARGV do
  local t = 5 + 2 * tonumber(ARGV[i])
  redis.call('HINCRBY', KEYS[t], ARGV[3], tonumber(ARGV[i + 2]))
  redis.call('HINCRBY', KEYS[t + 1], ARGV[3] .. ':' .. ARGV[i + 1], tonumber(ARGV[i + 2]))
  i = i + 3
end
if redis.call('HLEN', KEYS[2]) == 0 then redis.call('SREM', KEYS[5], ARGV[2]) end
return 1

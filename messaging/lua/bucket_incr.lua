-- Count hits in a hash of time buckets (messaging/stats.py), pruning the buckets that left the window.
-- KEYS[1]: the bucket hash. ARGV: now (empty: Redis TIME), bucket width, buckets kept, amount, ttl seconds.
local width = tonumber(ARGV[2])
local bucket = math.floor(now / width)
local oldest = bucket - tonumber(ARGV[3]) + 1
redis.call('HINCRBY', KEYS[1], bucket, tonumber(ARGV[4]))
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(field) < oldest then redis.call('HDEL', KEYS[1], field) end
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return bucket

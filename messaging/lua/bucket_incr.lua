-- Count hits in hashes of time buckets (messaging/stats.py), any number of counters in one call.
-- KEYS[i]: a bucket hash, or a lifetime total (a string). ARGV[1]: now (empty: Redis TIME); then per key four
-- values: bucket width ('' for a lifetime total: INCRBY), buckets kept, amount, ttl seconds.
-- Only an increment that starts a bucket prunes the buckets that left the window and sets the expiry: until the
-- next bucket starts nothing else can leave, and a key that lives `ttl` from its newest bucket's start outlives
-- every read of it (ttl is at least twice the window, or one period more than the periods kept).
for i = 1, #KEYS do
  local at = 1 + (i - 1) * 4
  local amount = tonumber(ARGV[at + 3])
  if ARGV[at + 1] == '' then
    redis.call('INCRBY', KEYS[i], amount)
  else
    local width = tonumber(ARGV[at + 1])
    local bucket = math.floor(now / width)
    if tonumber(redis.call('HINCRBY', KEYS[i], bucket, amount)) == amount then  -- a bucket started
      local oldest = bucket - tonumber(ARGV[at + 2]) + 1
      for _, field in ipairs(redis.call('HKEYS', KEYS[i])) do
        if tonumber(field) < oldest then redis.call('HDEL', KEYS[i], field) end
      end
      redis.call('EXPIRE', KEYS[i], tonumber(ARGV[at + 4]))
    end
  end
end
return #KEYS

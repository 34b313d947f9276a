-- Sum the buckets of a hash of time buckets (messaging/stats.py) that overlap (now - window, now].
-- KEYS[1]: the bucket hash. ARGV: now (empty: Redis TIME), bucket width, window.
local width = tonumber(ARGV[2])
local bucket = math.floor(now / width)
local oldest = math.floor((now - tonumber(ARGV[3])) / width)
local total = 0
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  if b >= oldest and b <= bucket then total = total + tonumber(flat[i + 1]) end
end
return total

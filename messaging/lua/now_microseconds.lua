-- `now` in microseconds (messaging/clock.py): from ARGV[1] when the caller passes an explicit time (simulations,
-- tests), else from the Redis server's clock. The first snippet of every script that measures time in microseconds.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

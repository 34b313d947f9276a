-- `now` in seconds (messaging/clock.py): from ARGV[1] when the caller passes an explicit time (simulations, tests),
-- else from the Redis server's clock, so that every host of the cluster measures time alike. Prepended to every
-- script that measures time in seconds.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end

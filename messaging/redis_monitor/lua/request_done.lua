-- A request is answered (messaging/redis_monitor/monitor.py): its answer was acknowledged by Kafka, so its stream
-- entry is acknowledged and dropped and its request key deleted, in one call (all three share the hash tag
-- {requests}).
-- KEYS: stream, request key. ARGV: group, entry id. Reply: 1 when the entry was still pending (0: another monitor
-- that took it over finished it first).
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return acked

-- Keep a request this monitor is working on (messaging/redis_monitor/claim.py): reset its idle time, so that no other
-- monitor takes it over (XAUTOCLAIM after CRAWLFLEET_MONITOR_LOCK_TTL), but only while it is still this monitor's.
-- KEYS: stream. ARGV: group, consumer, entry id. Reply: 1 renewed, 0 no longer ours (taken over or finished).
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #pending == 0 then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1

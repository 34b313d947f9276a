-- Add a schedule, or replace one's cron, time zone and request (messaging/schedules.py); now_seconds.lua is prepended.
-- A new schedule fires its first due time after now; a replaced one keeps its firings and counts, and only due times
-- after both its last firing and now are still to fire (a new expression never fires a time already past).
-- KEYS: schedules set, schedule hash. ARGV: now (or ''), name, replace (1/0), then field/value pairs.
-- Reply: 1 added, 2 replaced, 0 exists (and replace is 0), -1 missing (and replace is 1).
local exists = redis.call('EXISTS', KEYS[2]) == 1
local replace = ARGV[3] == '1'
if exists and not replace then return 0 end
if replace and not exists then return -1 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[2], unpack(fields))
if exists then
  local after = tonumber(redis.call('HGET', KEYS[2], 'after') or '0') or 0
  if now > after then redis.call('HSET', KEYS[2], 'after', tostring(now)) end
  return 2
end
redis.call('HSET', KEYS[2], 'created', tostring(now), 'after', tostring(now), 'missed', '0')
redis.call('SADD', KEYS[1], ARGV[2])
return 1

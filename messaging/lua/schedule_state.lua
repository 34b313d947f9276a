-- Pause, resume or remove a schedule (messaging/schedules.py); now_seconds.lua is prepended. Due times that pass
-- while a schedule is paused never fire (nor count as missed): resuming moves `after` up to now. A firing already
-- begun (`pending`) is completed by the leader whatever happens here.
-- KEYS: schedules set, schedule hash, history. ARGV: now (or ''), name, action (pause | resume | remove).
-- Reply: 1 done, 0 no such schedule.
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local action = ARGV[3]
if action == 'pause' then
  redis.call('HSETNX', KEYS[2], 'paused', tostring(now))
elseif action == 'resume' then
  if redis.call('HDEL', KEYS[2], 'paused') == 1 then
    local after = tonumber(redis.call('HGET', KEYS[2], 'after') or '0') or 0
    if now > after then redis.call('HSET', KEYS[2], 'after', tostring(now)) end
  end
elseif action == 'remove' then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('SREM', KEYS[1], ARGV[2])
else
  return redis.error_reply('unknown action ' .. action)
end
return 1

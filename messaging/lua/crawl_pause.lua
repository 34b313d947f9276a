-- Pause or resume a crawl in its record (messaging.pause): crawl:<id>'s state moves running -> paused (with the
-- time it was paused, Redis time) or paused -> running, and nothing else does.
-- KEYS[1] crawl:<id>. ARGV: 'pause' | 'resume', the state field, the paused field, 'running', 'paused'.
-- Reply: {what happened, the state now, since when it is (was) paused or ''}; what happened is 'changed',
-- 'unchanged' (already so) or 'refused' (stopped, finished, or no record: '' as the state).
local state_field, since_field, running, paused = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local state = redis.call('HGET', KEYS[1], state_field) or ''
local since = redis.call('HGET', KEYS[1], since_field) or ''
if ARGV[1] == 'pause' then
  if state == paused then return {'unchanged', state, since} end
  if state ~= running then return {'refused', state, ''} end
  local t = redis.call('TIME')
  since = string.format('%d.%06d', t[1], t[2])
  redis.call('HSET', KEYS[1], state_field, paused, since_field, since)
  return {'changed', paused, since}
end
if state == running then return {'unchanged', state, ''} end
if state ~= paused then return {'refused', state, ''} end
redis.call('HSET', KEYS[1], state_field, running)
redis.call('HDEL', KEYS[1], since_field)
return {'changed', running, since}

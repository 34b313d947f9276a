-- A retry of a crawl's failed pages takes its number here (messaging.failures): crawl:<id>'s retries go up by one,
-- and a finished crawl runs again — its finish and its announcement forgotten, its record kept as long as it runs —
-- so that the finisher declares it finished again, with a new event, once the retried pages are done. A stopped
-- crawl, or one without a record, takes no number.
-- KEYS[1] crawl:<id>. ARGV: state field, retries field, 'finished', 'running', 'stopped', the event field, the
-- finish time field.
-- Reply: {the state before ('' without a record), the retry's number ('0' when refused)}.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return {'', '0'} end
if state == ARGV[5] then return {state, '0'} end
local number = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
if state == ARGV[3] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
  redis.call('HDEL', KEYS[1], ARGV[6], ARGV[7])
  redis.call('PERSIST', KEYS[1])
end
return {state, tostring(number)}

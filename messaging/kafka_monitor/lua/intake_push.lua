-- The intake's guarded push (messaging/kafka_monitor/batch.py): push_seeds.lua itself, prepended as the local
-- function push(KEYS, ARGV) (the one push mechanism), plus the delivery that set each guard. A guard holds
-- `<topic>/<partition>/<offset>|<code>` of the record that first carried the content, so that the same record
-- delivered again (the monitor died after the write, before the commit; or the batch is retried) is told apart from
-- another request with the same content.
-- KEYS: those of push_seeds.lua. ARGV: n, n delivery ids, then the ARGV of push_seeds.lua.
-- Per task: push_seeds.lua's codes (1 new, 0 already in seeds, -1 duplicate), or 2 / 3 for a redelivery of a
-- record that was first answered with 1 / 0.
local n = tonumber(ARGV[1])
local push_args = {}
for i = n + 2, #ARGV do push_args[#push_args + 1] = ARGV[i] end
local earlier = {}
for i = 1, n do earlier[i] = redis.call('GET', KEYS[3 + i]) end
local out = push(KEYS, push_args)
for i = 1, n do
  local delivery = ARGV[1 + i]
  local before = earlier[i]
  if before and string.sub(before, 1, #delivery + 1) == delivery .. '|' then
    out[i] = 2 + (1 - tonumber(string.sub(before, #delivery + 2)))
  elseif out[i] >= 0 then
    redis.call('SET', KEYS[3 + i], delivery .. '|' .. out[i], 'XX', 'EX', push_args[1])
  end
end
return out

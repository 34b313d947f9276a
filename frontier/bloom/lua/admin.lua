-- Whole-shard housekeeping. KEYS[1] the shard's meta hash.
-- ARGV[1] 'expire': set the shard's TTL to ARGV[2] ms (0: never expire) on every key, and keep sliding it.
-- ARGV[1] 'delete': delete every key of the shard.   ARGV[1] 'keys': list them.
-- Reply: the shard's keys (meta first).
local meta = KEYS[1]
local raw = redis.call('HGET', meta, 'layout')
local layers = {}
if raw then layers = cjson.decode(raw) end
local keys = all_keys(layers)
table.insert(keys, 1, meta)
local action = ARGV[1]
if action == 'expire' and raw then
  local ttl = tonumber(ARGV[2])
  redis.call('HSET', meta, 'ttl', ttl, 'refresh_at', 0)
  for _, key in ipairs(keys) do
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('PERSIST', key) end
  end
elseif action == 'delete' then
  for _, key in ipairs(keys) do redis.call('DEL', key) end
end
return keys

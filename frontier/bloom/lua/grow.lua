-- Add layer number ARGV[1] (0-based: the number of layers the caller saw) to one shard, unless another worker
-- already did. The parts are preallocated (SETRANGE of the last byte: an exact-size string, where growing it
-- cell by cell would let Redis over-allocate), and the shard's TTL, if any, covers them at once.
--
-- KEYS[1] the shard's meta hash; KEYS[2..] the new layer's part keys (group by group)
-- ARGV[1] expected layer count   ARGV[2] the layer as JSON (see common.lua)   ARGV[3] bits per cell
-- ARGV[4] TTL in ms (0 = none)   ARGV[5] now in ms ('' = the Redis clock)
-- Reply: the number of layers after the call.
local meta = KEYS[1]
local raw = redis.call('HGET', meta, 'layout')
local layers = {}
if raw then layers = cjson.decode(raw) end
if #layers ~= tonumber(ARGV[1]) then return #layers end

local layer = cjson.decode(ARGV[2])
local cell_bits = tonumber(ARGV[3])
for p, key in ipairs(layer.keys) do
  redis.call('DEL', key)
  redis.call('SETRANGE', key, layer.h * layer.sizes[p] * cell_bits / 8 - 1, '\0')
end
layers[#layers + 1] = layer
redis.call('HSET', meta, 'layout', cjson.encode(layers), 'layers', #layers, 'count:' .. (#layers - 1), 0,
  'ttl', ARGV[4], 'refresh_at', 0)
if #layers == 1 then redis.call('HSET', meta, 'total', 0) end
refresh_ttl(meta, layers, ARGV[4], 0, ARGV[5])
return #layers

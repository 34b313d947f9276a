-- Add, check or remove a batch of fingerprints in one shard of a counting Bloom filter (seed 4.2.3.2: cells are
-- 4-bit counters instead of bits, so that an element can be deleted).
--
-- KEYS[1] the shard's meta hash      ARGV[1] 'add' | 'check' | 'remove'
-- ARGV[2] packed hashes (common.lua)  ARGV[3] now in ms for the TTL refresh ('' = the Redis clock)
-- Reply: {0, verdicts, full, refreshed, layers, deferred}: '1' = new (add), present (check), removed (remove);
-- '2' = deferred (the newest layer is full: add a layer and send again). {-1}: the shard has no layout.
--
-- Present = all k counters non-zero in every group of one layer. add: a fingerprint absent from every layer is
-- new and increments its counters in the newest layer (BITFIELD OVERFLOW SAT INCRBY u4). remove: a present
-- fingerprint decrements its counters in the oldest layer that holds it (a URL lives in the layer it was added
-- to: older layers were full and frozen then, and never gain elements).
-- Saturation: a counter stops at 15 and is then never decremented, since its true count is unknown; a removal
-- leaves it at 15, so a false positive may persist, never a false negative. At the optimal load (ln 2 elements
-- per counter on average) a counter reaches 16 with probability about 1e-15 (Fan et al. 2000); increments that
-- reach 15 are counted in the meta's `saturated`.
-- A fingerprint repeated in one batch is handled once: later copies are duplicates (add) or already gone (remove).
local MAX = 15
local meta = KEYS[1]
local state = redis.call('HMGET', meta, 'layout', 'ttl', 'refresh_at')
if not state[1] then return {-1} end
local layers = cjson.decode(state[1])
local function count_field(l) return 'count:' .. (l - 1) end
local mode = ARGV[1]
local blob = ARGV[2]
local h1, h2, sel = unpack_hashes(blob)
local n = #h1

local repeated, first, pending = {}, {}, {}
for i = 1, n do
  local id = string.sub(blob, 24 * i - 23, 24 * i - 8)
  if first[id] then repeated[i] = true else first[id] = true; pending[#pending + 1] = i end
end

-- GET the counters of `which` in layer l. Returns the fingerprints with a zero counter, and per key the
-- fingerprints, the counter offsets and values in operation order.
local function read(l, which)
  local k = layers[l].k * layers[l].h -- operations per fingerprint
  local zero, owners, offsets, values = {}, {}, {}, {}
  local ops, urls, stride = plan(layers[l], h1, h2, sel, which, 'GET', 'u4', 4, nil)
  for key, list in pairs(ops) do
    local got = execute(key, list, stride, false)
    local own, offs, who = urls[key], {}, {}
    local t = 0
    for o = 1, #own do
      local i = own[o]
      for q = t + 1, t + k do
        who[q] = i
        offs[q] = list[(q - 1) * stride + 3]
        if got[q] == 0 then zero[i] = true end
      end
      t = t + k
    end
    owners[key], offsets[key], values[key] = who, offs, got
  end
  return zero, owners, offsets, values
end

local newest = #layers
local verdict = {}
local full, deferred = 0, 0
if mode == 'remove' then
  local removed_total = 0
  for l = 1, newest do
    if #pending == 0 then break end
    local zero, owners, offsets, values = read(l, pending)
    local rest, here = {}, {}
    for _, i in ipairs(pending) do
      if zero[i] then rest[#rest + 1] = i else here[i] = true; verdict[i] = '1' end
    end
    for key, who in pairs(owners) do
      local dec, d = {}, 0
      for t = 1, #who do
        local v = values[key][t]
        if here[who[t]] and v > 0 and v < MAX then
          dec[d + 1] = 'INCRBY'; dec[d + 2] = 'u4'; dec[d + 3] = offsets[key][t]; dec[d + 4] = '-1'
          d = d + 4
        end
      end
      if d > 0 then execute(key, dec, 4, true) end
    end
    local removed = #pending - #rest
    removed_total = removed_total + removed
    if removed > 0 then redis.call('HINCRBY', meta, count_field(l), -removed) end
    pending = rest
  end
  if removed_total > 0 then redis.call('HINCRBY', meta, 'total', -removed_total) end
else
  local adding = mode == 'add'
  for l = 1, (adding and newest - 1 or newest) do
    local zero = read(l, pending)
    local rest = {}
    for _, i in ipairs(pending) do
      if zero[i] then rest[#rest + 1] = i elseif not adding then verdict[i] = '1' end
    end
    pending = rest
  end
  if adding then
    local zero = read(newest, pending)
    local room = layers[newest].limit - (tonumber(redis.call('HGET', meta, count_field(newest))) or 0)
    local new = {}
    for _, i in ipairs(pending) do -- only new URLs need room: duplicates are answered even when the layer is full
      if zero[i] and #new >= room then
        verdict[i] = '2'
        deferred = deferred + 1
      elseif zero[i] then
        new[#new + 1] = i
        verdict[i] = '1'
      end
    end
    local saturated = 0
    local ops, _, stride = plan(layers[newest], h1, h2, sel, new, 'INCRBY', 'u4', 4, '1')
    for key, list in pairs(ops) do
      for _, v in ipairs(execute(key, list, stride, true)) do
        if v == MAX then saturated = saturated + 1 end
      end
    end
    if #new > 0 then
      redis.call('HINCRBY', meta, count_field(newest), #new)
      redis.call('HINCRBY', meta, 'total', #new)
    end
    if deferred > 0 then full = 1 end -- URLs wait for the next layer: grown when needed, not when just full
    if saturated > 0 then redis.call('HINCRBY', meta, 'saturated', saturated) end
  end
end

local out = {}
for i = 1, n do
  if repeated[i] then out[i] = '0' else out[i] = verdict[i] or '0' end
end
local refreshed = refresh_ttl(meta, layers, state[2], state[3], ARGV[3])
return {0, table.concat(out), full, refreshed, newest, deferred}

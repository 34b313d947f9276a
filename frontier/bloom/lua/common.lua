-- Shared by counting.lua, grow.lua and admin.lua (prepended when they are registered). The bit filter's hot path
-- is frontier/bloom/direct.py (the same cell computation, in numpy, sent as raw BITFIELD commands).
--
-- A shard's meta hash (KEYS[1]) holds `layout`: JSON list of layers, oldest first, each
--   {"k": hashes per group, "h": groups, "m": cells per group, "c": capacity, "limit": elements after which
--    the layer is closed, "sizes": [cells per group in each part], "keys": [key of each part]}
-- plus `layers`, `count:<layer>` (elements per layer), `total`, `saturated`, `ttl` (ms, 0 = none), `refresh_at`.
-- Every part key shares the meta key's hash tag, so one call serves the whole shard on a Redis Cluster.
--
-- Parts: a layer is cut into parts (Redis strings sized to jemalloc classes); part p holds sizes[p] cells of
-- every group, group after group. A fingerprint picks one part with probability proportional to its size (from
-- its 24-bit selector), so every part fills at the same rate, and has all its k*h cells there.
local CHUNK = 1800 -- operations per BITFIELD call: 4 arguments each stays under Lua's unpack limit (8000)
local SELECTOR_RANGE = 16777216 -- 2^24

local function now_ms(arg)
  local explicit = tonumber(arg)
  if explicit then return explicit end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Three little-endian doubles per fingerprint: two base hashes (integers below 2^52, exact in Lua) and the
-- part selector (below 2^24).
local function unpack_hashes(blob)
  local h1, h2, sel = {}, {}, {}
  local at = 1
  for i = 1, #blob / 24 do
    h1[i], h2[i], sel[i], at = struct.unpack('<ddd', blob, at)
  end
  return h1, h2, sel
end

-- BITFIELD operations for the fingerprints listed in `which` in one layer: ops[key] is the flat argument list
-- (fingerprint order), urls[key] the fingerprints in that order (k*h operations each). Cells come from enhanced
-- double hashing (Kirsch-Mitzenmacher h1 + i*h2, plus Dillinger's growing increment) mod the part's cells per
-- group; group g takes hashes g*k .. g*k+k-1 of the sequence, in its own region of the part.
-- `value` is nil for GET.
local function plan(layer, h1, h2, sel, which, verb, width, width_bits, value)
  local k, h, sizes, keys, m = layer.k, layer.h, layer.sizes, layer.keys, layer.m
  local parts = #sizes
  local stride = value and 4 or 3
  local ops, urls, lengths, owned = {}, {}, {}, {}
  for p = 1, parts do
    local key = keys[p]
    ops[key], urls[key], lengths[key], owned[key] = {}, {}, 0, 0
  end
  for _, i in ipairs(which) do
    local part = 1
    if parts > 1 then
      local u = sel[i] * m / SELECTOR_RANGE
      while part < parts and u >= sizes[part] do
        u = u - sizes[part]
        part = part + 1
      end
    end
    local c = sizes[part]
    local x = math.fmod(h1[i], c)
    local y = math.fmod(h2[i], c)
    local key = keys[part]
    local list = ops[key]
    local n = lengths[key]
    local o = owned[key] + 1
    owned[key] = o
    urls[key][o] = i
    local j = 0
    for g = 0, h - 1 do
      local base = g * c
      for _ = 1, k do
        list[n + 1] = verb
        list[n + 2] = width
        list[n + 3] = (base + x) * width_bits
        if value then list[n + 4] = value end
        n = n + stride
        x = x + y
        if x >= c then x = x - c end
        y = y + j
        if y >= c then y = y - c end
        j = j + 1
      end
    end
    lengths[key] = n
  end
  return ops, urls, stride
end

-- Runs one key's operations in chunks; returns all replies in order.
local function execute(key, list, stride, overflow)
  local step = CHUNK * stride
  local out = {}
  local t = 0
  for s = 1, #list, step do
    local e = math.min(s + step - 1, #list)
    local replies
    if overflow then
      replies = redis.call('BITFIELD', key, 'OVERFLOW', 'SAT', unpack(list, s, e))
    else
      replies = redis.call('BITFIELD', key, unpack(list, s, e))
    end
    if t == 0 and e == #list then return replies end
    for r = 1, #replies do out[t + r] = replies[r] end
    t = t + #replies
  end
  return out
end

local function all_keys(layers)
  local out = {}
  for _, layer in ipairs(layers) do
    for _, key in ipairs(layer.keys) do out[#out + 1] = key end
  end
  return out
end

-- Slides the TTL of the whole shard forward, at most every ttl/8: returns 1 when it did.
local function refresh_ttl(meta, layers, ttl, refresh_at, now_arg)
  ttl = tonumber(ttl) or 0
  if ttl <= 0 then return 0 end
  local now = now_ms(now_arg)
  if now < (tonumber(refresh_at) or 0) then return 0 end
  for _, key in ipairs(all_keys(layers)) do redis.call('PEXPIRE', key, ttl) end
  redis.call('HSET', meta, 'refresh_at', string.format('%d', now + math.floor(ttl / 8)))
  redis.call('PEXPIRE', meta, ttl)
  return 1
end

local function range(n)
  local out = {}
  for i = 1, n do out[i] = i end
  return out
end

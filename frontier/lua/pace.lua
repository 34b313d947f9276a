-- Paced hits (frontier/politeness.py), shared by take.lua and reserve.lua: when may the next request of a domain go
-- out, for two throttle keys at once (this spider type on every host, this host IP on every spider type)?
--
-- Each key has a token bucket <owner>:{d}:pace = {at = time of its last hit, tokens = tokens left then}: it refills
-- at one token per `spacing` up to `burst`, a hit takes one. burst 1: hits at least `spacing` apart. The bucket
-- is refilled lazily with the spacing of *this* call, so a rate changed live applies to the very next step.
-- Each key also keeps its exact sliding window (<owner>:{d}:throttle, one member per hit, scored by the time the
-- hit is due to go out), checked `slack` wider than the site's window, because a request may leave up to `slack`
-- after its slot (the worker re-reserves one that would be later): the count of hits the site sees in any window
-- then never exceeds the limit.
--
-- A call reads each bucket once (pace_load), finds slots and records hits as many times as it has tasks (pace_slot,
-- pace_hit: the state is kept here meanwhile, so each hit sees the ones before it exactly as separate calls would),
-- and writes each bucket and window once (pace_save). The bucket also keeps, for its window:
--   size  the window's members (+1 a hit, -1 a hit reserve.lua withdrew, -what a trim removed; park.lua's
--         withdrawals are not subtracted, so it is an upper bound): below the limit, no window can be full and the
--         window is not read at all; at 0 the window does not exist, and the hit that makes it sets its expiry;
--   n     hits since the window was last trimmed of hits that left it: trimmed every TRIM_EVERY hits, not on every
--         call (a hit that left the window is never among the `limit` most recent that the check reads unless
--         fewer than `limit` are in it, ZCOUNT);
--   seq   its hits: a hit's member is `<slot>-<a>.<b>`, `a` and `b` the two buckets' seq, unique in both windows
--         (each window only holds hits its own bucket counted, and a bucket expires with its window);
--   until when the bucket and its window expire (ms, Redis time): both are extended together, and only once the
--         expiry a hit needs passes `until`, then to twice what it needs (not a PEXPIRE per hit), or when the hit
--         makes the window anew (a window emptied by withdrawals is deleted, its expiry with it; park.lua, which
--         does not count its withdrawals, forgets `until` instead).
local pace_fmt = function(n) return string.format('%d', n) end
local TRIM_EVERY = 32

-- Read both buckets. No bucket: no window either (they expire together, and a hit writes both); a bucket written
-- before it counted its window's size has it counted once (ZCARD).
local function pace_load(throttles, paces, now, wide)
  local state = {throttles = throttles, paces = paces, now = now, wide = wide, buckets = {}, slot = 0, hits = {},
                 pending = 0}
  for i = 1, #paces do
    local raw = redis.call('HMGET', paces[i], 'at', 'tokens', 'seq', 'n', 'size', 'until')
    local size = tonumber(raw[5])
    if not size then size = raw[1] and redis.call('ZCARD', throttles[i]) or 0 end
    state.buckets[i] = {last = tonumber(raw[1]), tokens = tonumber(raw[2]), seq = tonumber(raw[3]) or 0,
                        n = tonumber(raw[4]) or 0, size = size, expires = tonumber(raw[6]) or 0}
  end
  return state
end

-- The hits recorded by this call and not yet written, into both windows (one ZADD each).
local function pace_flush(state)
  if #state.hits == 0 then return end
  for i = 1, #state.throttles do redis.call('ZADD', state.throttles[i], unpack(state.hits)) end
  state.hits = {}
end

-- The earliest time >= from at which both buckets hold a token and both windows have room (microseconds).
local function pace_slot(state, from, limit, spacing, burst)
  local slot = from
  for i = 1, #state.buckets do
    local bucket = state.buckets[i]
    local last, tokens = bucket.last, bucket.tokens
    if last and tokens then
      local base = math.max(from, last)
      if math.min(burst, tokens + (base - last) / spacing) < 1 then
        base = last + (1 - tokens) * spacing
      end
      if base > slot then slot = base end
    end
  end
  for i = 1, #state.throttles do
    if state.buckets[i].size >= limit then  -- the window may be full: count it
      pace_flush(state)
      if redis.call('ZCOUNT', state.throttles[i], '(' .. pace_fmt(state.now - state.wide), '+inf') >= limit then
        -- the window has room once the limit-th most recent hit has left it
        local kth = redis.call('ZREVRANGE', state.throttles[i], limit - 1, limit - 1, 'WITHSCORES')
        local opens = tonumber(kth[2]) + state.wide
        if opens > slot then slot = opens end
      end
    end
  end
  return math.ceil(slot)
end

-- Record a hit due at `slot` (in both windows at pace_flush) and in both buckets; returns its unique member.
local function pace_hit(state, slot, spacing, burst)
  local member = {}
  for i = 1, #state.buckets do
    local bucket = state.buckets[i]
    local left = burst
    if bucket.last and bucket.tokens then
      left = math.min(burst, bucket.tokens + math.max(0, slot - bucket.last) / spacing)
    end
    bucket.last, bucket.tokens = slot, tonumber(string.format('%.6f', left - 1))
    if bucket.size <= 0 then bucket.fresh = true end  -- this hit makes the window: it has no expiry yet
    bucket.seq, bucket.n, bucket.size = bucket.seq + 1, bucket.n + 1, math.max(bucket.size, 0) + 1
    member[i] = pace_fmt(bucket.seq)
  end
  local hit = pace_fmt(slot) .. '-' .. table.concat(member, '.')
  state.hits[#state.hits + 1] = slot
  state.hits[#state.hits + 1] = hit
  state.recorded = true
  if slot > state.slot then state.slot = slot end
  return hit
end

-- Write the hits and the buckets; trim windows whose bucket counted TRIM_EVERY hits since their last trim; extend
-- both keys of a bucket when the last hit needs them to live past `until` (ttl_ms past the hit's relevance).
local function pace_save(state, spacing, burst, ttl_ms)
  if not state.recorded then return end
  pace_flush(state)
  local now_ms = math.floor(state.now / 1000)
  local needed = now_ms + ttl_ms + math.ceil((state.slot - state.now + burst * spacing) / 1000)
  for i = 1, #state.paces do
    local bucket = state.buckets[i]
    if bucket.n >= TRIM_EVERY then
      bucket.size = bucket.size - redis.call('ZREMRANGEBYSCORE', state.throttles[i], '-inf', state.now - state.wide)
      bucket.n = 0
    end
    local extend = needed > bucket.expires or bucket.fresh
    if extend then bucket.expires = needed + (needed - now_ms) end
    redis.call('HSET', state.paces[i], 'at', pace_fmt(bucket.last), 'tokens', string.format('%.6f', bucket.tokens),
               'seq', pace_fmt(bucket.seq), 'n', pace_fmt(bucket.n), 'size', pace_fmt(bucket.size),
               'until', pace_fmt(bucket.expires))
    if extend then  -- relative to this call's clock (a caller may pass its own `now`)
      redis.call('PEXPIRE', state.paces[i], bucket.expires - now_ms)
      redis.call('PEXPIRE', state.throttles[i], bucket.expires - now_ms)
    end
  end
end
-- The spacing (us) of a rate of `limit` hits per `window` us, slowed to the site's adaptive delay when it has one.
local function pace_spacing(limit, window, adaptive_key)
  local spacing = window / limit
  if adaptive_key then
    local delay = tonumber(redis.call('HGET', adaptive_key, 'delay'))
    if delay and delay > spacing then spacing = delay end
  end
  return spacing
end

-- How late a request may leave after its slot: a fifth of the spacing, at least the floor.
local function pace_slack(spacing, floor)
  return math.max(floor, math.floor(spacing / 5))
end

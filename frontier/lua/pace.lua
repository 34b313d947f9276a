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
local pace_fmt = function(n) return string.format('%d', n) end

-- The earliest time >= now at which both buckets hold a token and both windows have room (microseconds).
local function pace_slot(throttles, paces, now, limit, wide, spacing, burst)
  local slot = now
  for i = 1, #paces do
    local state = redis.call('HMGET', paces[i], 'at', 'tokens')
    local last, tokens = tonumber(state[1]), tonumber(state[2])
    if last and tokens then
      local base = math.max(now, last)
      if math.min(burst, tokens + (base - last) / spacing) < 1 then
        base = last + (1 - tokens) * spacing
      end
      if base > slot then slot = base end
    end
  end
  for i = 1, #throttles do
    redis.call('ZREMRANGEBYSCORE', throttles[i], '-inf', now - wide)
    if redis.call('ZCARD', throttles[i]) >= limit then
      -- the window has room once the limit-th most recent hit has left it
      local kth = redis.call('ZREVRANGE', throttles[i], limit - 1, limit - 1, 'WITHSCORES')
      local opens = tonumber(kth[2]) + wide
      if opens > slot then slot = opens end
    end
  end
  return math.ceil(slot)
end

-- Record a hit due at `slot` in both windows and both buckets; returns the hit's unique member.
local function pace_record(throttles, paces, sequence, now, slot, spacing, burst, ttl_ms)
  local hit = pace_fmt(slot) .. '-' .. redis.call('INCR', sequence)
  local ttl = ttl_ms + math.ceil((slot - now + burst * spacing) / 1000)
  for i = 1, #paces do
    local state = redis.call('HMGET', paces[i], 'at', 'tokens')
    local last, tokens = tonumber(state[1]), tonumber(state[2])
    local left = burst
    if last and tokens then left = math.min(burst, tokens + math.max(0, slot - last) / spacing) end
    redis.call('HSET', paces[i], 'at', pace_fmt(slot), 'tokens', string.format('%.6f', left - 1))
    redis.call('PEXPIRE', paces[i], ttl)
  end
  for i = 1, #throttles do
    redis.call('ZADD', throttles[i], slot, hit)
    redis.call('PEXPIRE', throttles[i], ttl)
  end
  redis.call('PEXPIRE', sequence, ttl)
  return hit
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

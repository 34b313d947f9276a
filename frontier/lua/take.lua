-- One politeness step (seed 4.2.2): take the job's next task of one domain if the domain may be hit now.
--
-- KEYS[1] <job>:{d}:queue         KEYS[2] <job>:{d}:inflight     KEYS[3] <job>:{d}:leasescores
-- KEYS[4] <spider_type>:{d}:throttle (all hosts)                 KEYS[5] <ip>:{d}:throttle (all spider types)
-- KEYS[6] block:{d}               KEYS[7] hits:{d}:sequence
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] hits allowed per window   ARGV[3] window (us)
-- ARGV[4] lease (us)   ARGV[5] the queue head the caller checked against robots.txt ('' = any)
-- ARGV[6] TTL of the throttle keys (ms): the window plus a margin, so idle windows vanish
-- ARGV[7] TTL of the lease scores (ms): far beyond any lease, so that a dead job's hash does not stay forever
--
-- Windows are exact and sliding: a hit at t counts for every check at now with now - t < window.
-- Reply: {status, now, value, task}; value = microseconds to wait (blocked, throttled) or the lease deadline (ok).
-- now: set by the preamble messaging.clock.LUA_NOW_MICROSECONDS (ARGV[1], or the Redis clock)
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local fmt = function(n) return string.format('%d', n) end

local blocked_until = tonumber(redis.call('GET', KEYS[6]))
if blocked_until and blocked_until > now then
  return {'blocked', fmt(now), fmt(blocked_until - now)}
end

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head == 0 then
  return {'empty', fmt(now), '0'}
end
if ARGV[5] ~= '' and head[1] ~= ARGV[5] then
  return {'changed', fmt(now), '0'}
end

local wait = 0
for i = 4, 5 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local count = redis.call('ZCARD', KEYS[i])
  if count >= limit then
    local opens = window
    if limit > 0 then
      -- the window opens when all but limit - 1 of its hits have left it
      local oldest = redis.call('ZRANGE', KEYS[i], count - limit, count - limit, 'WITHSCORES')
      opens = tonumber(oldest[2]) + window - now
    end
    if opens > wait then wait = opens end
  end
end
if wait > 0 then
  return {'throttled', fmt(now), fmt(wait)}
end

local hit = fmt(now) .. '-' .. redis.call('INCR', KEYS[7])
local ttl = tonumber(ARGV[6])
for i = 4, 5 do
  redis.call('ZADD', KEYS[i], now, hit)
  redis.call('PEXPIRE', KEYS[i], ttl)
end
redis.call('PEXPIRE', KEYS[7], ttl)

local task, score = head[1], head[2]
local deadline = now + tonumber(ARGV[4])
redis.call('ZREM', KEYS[1], task)
redis.call('ZADD', KEYS[2], deadline, task)
redis.call('HSET', KEYS[3], task, score)
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[7]))
return {'ok', fmt(now), fmt(deadline), task}

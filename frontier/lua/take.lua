-- One politeness step (seed 4.2.2): take the job's next task of one domain if a hit on the domain can be due soon.
--
-- KEYS[1] <job>:{d}:queue         KEYS[2] <job>:{d}:inflight     KEYS[3] <job>:{d}:leasescores
-- KEYS[4] <spider_type>:{d}:throttle (all hosts)                 KEYS[5] <ip>:{d}:throttle (all spider types)
-- KEYS[6] block:{d}               KEYS[7] hits:{d}:sequence
-- KEYS[8] <spider_type>:{d}:pace  KEYS[9] <ip>:{d}:pace          KEYS[10] adaptive:{d}
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] hits allowed per window   ARGV[3] window (us)
-- ARGV[4] lease (us)   ARGV[5] the queued task the caller checked against robots.txt ('' = the head, any): it may
--          lie behind tasks of hosts whose robots.txt is pending (a take skips past them, frontier/client/take.py)
-- ARGV[6] TTL margin of the throttle keys (ms): idle windows and buckets vanish this long after they stop mattering
-- ARGV[7] TTL of the lease scores (ms): far beyond any lease, so that a dead job's hash does not stay forever
-- ARGV[8] burst   ARGV[9] horizon (us): how far ahead a hit may be reserved   ARGV[10] slack floor (us)
-- ARGV[11] '1': the site's adaptive delay (KEYS[10]) may slow the spacing down
--
-- The hit is reserved at the earliest slot both buckets and both windows allow (pace.lua); the task is taken only
-- if that slot is at most the horizon ahead, and the worker sends it no earlier than the slot.
-- Reply: {status, now, value, task, slot, hit, slack, left}; value = microseconds to wait (blocked, throttled) or
-- the lease deadline (ok); slot = when the request may go out (us); slack = how late it may still go out (us);
-- left = tasks still queued (0: the walk drops the domain from the job's ready index, frontier/client/ready.py).
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])

local blocked_until = tonumber(redis.call('GET', KEYS[6]))
if blocked_until and blocked_until > now then
  return {'blocked', pace_fmt(now), pace_fmt(blocked_until - now)}
end

local head
if ARGV[5] == '' then
  head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #head == 0 then
    return {'empty', pace_fmt(now), '0'}
  end
else
  local score = redis.call('ZSCORE', KEYS[1], ARGV[5])
  if not score then  -- taken meanwhile (another step, an expired lease's requeue moved it): ask again
    return {'changed', pace_fmt(now), '0'}
  end
  head = {ARGV[5], score}
end
if limit <= 0 then
  return {'throttled', pace_fmt(now), pace_fmt(window)}
end

local adaptive = nil
if ARGV[11] == '1' then adaptive = KEYS[10] end
local spacing = pace_spacing(limit, window, adaptive)
local slack = pace_slack(spacing, tonumber(ARGV[10]))
local burst = tonumber(ARGV[8])
local throttles, paces = {KEYS[4], KEYS[5]}, {KEYS[8], KEYS[9]}
local slot = pace_slot(throttles, paces, now, limit, window + slack, spacing, burst)
local ahead = slot - now - tonumber(ARGV[9])
if ahead > 0 then
  return {'throttled', pace_fmt(now), pace_fmt(ahead)}
end
local hit = pace_record(throttles, paces, KEYS[7], now, slot, spacing, burst, tonumber(ARGV[6]))

local task, score = head[1], head[2]
local deadline = now + tonumber(ARGV[4])
redis.call('ZREM', KEYS[1], task)
redis.call('ZADD', KEYS[2], deadline, task)
redis.call('HSET', KEYS[3], task, score)
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[7]))
return {'ok', pace_fmt(now), pace_fmt(deadline), task, pace_fmt(slot), hit, pace_fmt(slack),
        redis.call('ZCARD', KEYS[1])}

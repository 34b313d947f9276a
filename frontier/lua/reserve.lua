-- Reserve a hit for a request that is about to go out without one (frontier/client/take.py, FrontierClient.reserve):
-- a follow-up (a redirect, a retry: another request to the site), or a request that could not leave within the
-- slack of its slot (its old hit, never sent, is withdrawn first). No task is popped. A slot further ahead than the
-- horizon is not recorded (hit ''): the worker asks again nearer the time, so that a rate changed meanwhile applies.
--
-- KEYS[1] <spider_type>:{d}:throttle   KEYS[2] <ip>:{d}:throttle
-- KEYS[3] <spider_type>:{d}:pace       KEYS[4] <ip>:{d}:pace       KEYS[5] adaptive:{d}   KEYS[6] block:{d}
-- ARGV[1] now (us, '' = the Redis clock)   ARGV[2] hits per window   ARGV[3] window (us)
-- ARGV[4] the withdrawn hit ('' = none)   ARGV[5] TTL margin (ms)   ARGV[6] burst   ARGV[7] slack floor (us)
-- ARGV[8] '1': adaptive delay   ARGV[9] horizon (us)
-- Reply: {now, slot, hit, slack}; the slot is no earlier than the end of a block; hit '' = not recorded.
local limit = math.max(1, tonumber(ARGV[2]))  -- a rate of 0 stops taking; a request already taken goes out slowly
local window = tonumber(ARGV[3])
local throttles = {KEYS[1], KEYS[2]}
local removed = {0, 0}
if ARGV[4] ~= '' then
  for i = 1, #throttles do removed[i] = redis.call('ZREM', throttles[i], ARGV[4]) end
end
local adaptive = nil
if ARGV[8] == '1' then adaptive = KEYS[5] end
local spacing = pace_spacing(limit, window, adaptive)
local slack = pace_slack(spacing, tonumber(ARGV[7]))
local burst = tonumber(ARGV[6])
local from = now
local blocked_until = tonumber(redis.call('GET', KEYS[6]))
if blocked_until and blocked_until > from then from = blocked_until end
local state = pace_load(throttles, {KEYS[3], KEYS[4]}, now, window + slack)
for i = 1, #state.buckets do state.buckets[i].size = state.buckets[i].size - removed[i] end
local slot = pace_slot(state, from, limit, spacing, burst)
if slot - now > tonumber(ARGV[9]) then
  if removed[1] + removed[2] > 0 then  -- the withdrawal is not written down: the next hit sets the expiries again
    for i = 1, #state.paces do redis.call('HDEL', state.paces[i], 'until') end
  end
  return {pace_fmt(now), pace_fmt(slot), '', pace_fmt(slack)}
end
local hit = pace_hit(state, slot, spacing, burst)
pace_save(state, spacing, burst, tonumber(ARGV[5]))
return {pace_fmt(now), pace_fmt(slot), hit, pace_fmt(slack)}

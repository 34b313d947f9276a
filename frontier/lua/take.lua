-- Politeness steps (seed 4.2.2): take the job's next tasks of one domain, each only if a hit on the domain can be due
-- soon. One call takes as many tasks as it is given heads, each step seeing the hits of the ones before it.
--
-- KEYS[1] <job>:{d}:queue         KEYS[2] <job>:{d}:inflight     KEYS[3] <job>:{d}:leasescores
-- KEYS[4] <spider_type>:{d}:throttle (all hosts)                 KEYS[5] <ip>:{d}:throttle (all spider types)
-- KEYS[6] block:{d}               KEYS[7] <spider_type>:{d}:pace KEYS[8] <ip>:{d}:pace   KEYS[9] adaptive:{d}
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] hits allowed per window   ARGV[3] window (us)
-- ARGV[4] lease (us)
-- ARGV[5] TTL margin of the throttle keys (ms): idle windows and buckets vanish this long after they stop mattering
-- ARGV[6] TTL of the lease scores (ms): far beyond any lease, so that a dead job's hash does not stay forever
-- ARGV[7] burst   ARGV[8] horizon (us): how far ahead a hit may be reserved   ARGV[9] slack floor (us)
-- ARGV[10] '1': the site's adaptive delay (KEYS[9]) may slow the spacing down
-- ARGV[11..] one per step: the queued task the caller checked against robots.txt, or '' for each (the queue's first
--          tasks, whichever they are then): a checked task may lie behind tasks of hosts whose robots.txt is pending
--          (a take skips past them, frontier/client/take.py)
--
-- The hit is reserved at the earliest slot both buckets and both windows allow (pace.lua); the task is taken only
-- if that slot is at most the horizon ahead, and the worker sends it no earlier than the slot.
-- Reply: one reply per step, up to the first that refused (a 'changed' one does not stop the others):
-- {status, now, value, task, slot, hit, slack[, left]}; value = microseconds to wait (blocked, throttled) or the
-- lease deadline (ok); slot = when the request may go out (us); slack = how late it may still go out (us); left =
-- tasks still queued, on the call's last step that took (0: the walk drops the domain from the job's ready index,
-- frontier/client/ready.py).
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local FIRST_HEAD = 11

local blocked_until = tonumber(redis.call('GET', KEYS[6]))
if blocked_until and blocked_until > now then
  return {{'blocked', pace_fmt(now), pace_fmt(blocked_until - now)}}
end

local lease = tonumber(ARGV[4])
local burst = tonumber(ARGV[7])
local horizon = tonumber(ARGV[8])
local spacing, slack, state  -- read at the first task found: an empty queue costs no bucket read

-- the tasks the steps would take, with their queue scores, in one read: the heads ('' each: the queue's first ones)
local heads, scores = {}, {}
if ARGV[FIRST_HEAD] == '' then
  local first = redis.call('ZRANGE', KEYS[1], 0, #ARGV - FIRST_HEAD, 'WITHSCORES')
  for i = 1, #first, 2 do
    heads[#heads + 1], scores[#scores + 1] = first[i], first[i + 1]
  end
  if #heads < #ARGV - FIRST_HEAD + 1 then heads[#heads + 1] = false end  -- the queue ends there: 'empty'
else
  for i = FIRST_HEAD, #ARGV do heads[#heads + 1] = ARGV[i] end
  scores = redis.call('ZMSCORE', KEYS[1], unpack(heads))
end

local replies = {}
local taken, popped, leased, leased_scores = 0, {}, {}, {}
for i = 1, #heads do
  local task, score = heads[i], scores[i]
  if not task then
    replies[#replies + 1] = {'empty', pace_fmt(now), '0'}
    break
  end
  if not score then  -- taken meanwhile (another step, an expired lease's requeue moved it): ask again
    replies[#replies + 1] = {'changed', pace_fmt(now), '0'}
  elseif limit <= 0 then
    replies[#replies + 1] = {'throttled', pace_fmt(now), pace_fmt(window)}
    break
  else
    if not state then
      local adaptive = nil
      if ARGV[10] == '1' then adaptive = KEYS[9] end
      spacing = pace_spacing(limit, window, adaptive)
      slack = pace_slack(spacing, tonumber(ARGV[9]))
      state = pace_load({KEYS[4], KEYS[5]}, {KEYS[7], KEYS[8]}, now, window + slack)
    end
    local slot = pace_slot(state, now, limit, spacing, burst)
    local ahead = slot - now - horizon
    if ahead > 0 then
      replies[#replies + 1] = {'throttled', pace_fmt(now), pace_fmt(ahead)}
      break
    end
    local hit = pace_hit(state, slot, spacing, burst)
    local deadline = now + lease
    popped[#popped + 1] = task
    local n = #leased
    leased[n + 1] = deadline
    leased[n + 2] = task
    leased_scores[n + 1] = task
    leased_scores[n + 2] = score
    replies[#replies + 1] = {'ok', pace_fmt(now), pace_fmt(deadline), task, pace_fmt(slot), hit, pace_fmt(slack)}
    taken = #replies
  end
end
if state then pace_save(state, spacing, burst, tonumber(ARGV[5])) end
if taken > 0 then  -- the leases, in one write each
  redis.call('ZREM', KEYS[1], unpack(popped))
  redis.call('ZADD', KEYS[2], unpack(leased))
  redis.call('HSET', KEYS[3], unpack(leased_scores))
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[6]))
  table.insert(replies[taken], redis.call('ZCARD', KEYS[1]))
end
return replies

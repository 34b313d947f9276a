-- The domain walk's one call per batch of due domains (frontier/client/ready.py): apply what the last batch learnt, then
-- read the domains that are due now, oldest due first.
--
-- KEYS[1] <job>:{<job>}:ready (zset: domain -> when it may next be fetched, us, Redis clock)
-- KEYS[2] <job>:{<job>}:readytasks (string: the job's queued tasks, a gauge for autoscalers)
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] most domains to return
-- ARGV[3] '1': every domain becomes due now (the default site config changed)
-- ARGV[4] tasks the job's queues lost since the last call (taken, or dropped unfetched): the gauge goes down
-- ARGV[5..] pairs (domain, op): '-' remove (its queue was empty); '=<us>' set (only if present);
--           '!' due now if present and later (a config change reopened it); '+' add, due now (only if absent)
-- Reply: {now, next, domain...}: next = the earliest due time after now ('-1': the index is empty).
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local fmt = function(n) return string.format('%d', n) end
local index = KEYS[1]
if ARGV[3] == '1' then
  for _, domain in ipairs(redis.call('ZRANGEBYSCORE', index, '(' .. fmt(now), '+inf')) do
    redis.call('ZADD', index, fmt(now), domain)
  end
end
local lost = tonumber(ARGV[4])
if lost ~= 0 and redis.call('DECRBY', KEYS[2], lost) < 0 then
  redis.call('SET', KEYS[2], 0)  -- a gauge never goes below zero (a landing counted late, a crash)
end
for i = 5, #ARGV, 2 do
  local domain, op = ARGV[i], ARGV[i + 1]
  local kind = string.sub(op, 1, 1)
  if kind == '-' then
    redis.call('ZREM', index, domain)
  elseif kind == '+' then
    redis.call('ZADD', index, 'NX', fmt(now), domain)
  elseif kind == '!' then
    redis.call('ZADD', index, 'XX', 'LT', fmt(now), domain)
  else
    redis.call('ZADD', index, 'XX', string.sub(op, 2), domain)
  end
end
local reply = {fmt(now), '-1'}
local due = redis.call('ZRANGEBYSCORE', index, '-inf', fmt(now), 'LIMIT', 0, tonumber(ARGV[2]))
for _, domain in ipairs(due) do reply[#reply + 1] = domain end
if #due == 0 then
  local first = redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')
  if #first > 0 then reply[2] = first[2] end
end
return reply

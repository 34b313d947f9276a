-- Tasks landed in some of a job's queues (dispatch, expired leases back in their queue, the reconcile): their
-- domains enter the job's ready index, due now, unless already there (a throttled domain keeps its due time), and the
-- job's ready-task gauge goes up. Called after the tasks are in their queues (frontier/client/ready.py: the invariant).
--
-- KEYS[1] <job>:{<job>}:ready   KEYS[2] <job>:{<job>}:readytasks
-- ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] tasks added   ARGV[3..] domains
-- Reply: how many domains were not in the index.
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local at = string.format('%d', now)
local added = 0
for i = 3, #ARGV do
  added = added + redis.call('ZADD', KEYS[1], 'NX', at, ARGV[i])
end
local tasks = tonumber(ARGV[2])
if tasks ~= 0 then redis.call('INCRBY', KEYS[2], tasks) end
return added

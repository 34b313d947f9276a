-- How many of a job's domains are due now, at the Redis clock of the index, and how many it lists (master/dispatcher.py:
-- a job with domains listed and none due holds queued tasks that all wait for their sites' next slots).
--
-- KEYS[1] <job>:{<job>}:ready   ARGV[1] now in microseconds ('' = the Redis clock)
-- Reply: {domains due now, domains in the index}.
-- now: set by the preamble messaging.clock.LUA_NOW_MICROSECONDS (ARGV[1], or the Redis clock)
return {redis.call('ZCOUNT', KEYS[1], '-inf', string.format('%d', now)), redis.call('ZCARD', KEYS[1])}

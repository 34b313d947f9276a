-- Block a domain cluster-wide until now + seconds (a 429/503 Retry-After); a block is only ever extended.
--
-- KEYS[1] block:{d}   ARGV[1] now in microseconds ('' = the Redis clock)   ARGV[2] seconds
-- ARGV[3] the pub/sub channel told of a new end (keys.BLOCKS_CHANNEL)   ARGV[4] the domain, as the message names it
-- Reply: the time the block ends (us, as a string).
-- now: set by the preamble messaging/lua/now_microseconds.lua (ARGV[1], or the Redis clock)
local until_us = now + math.floor(tonumber(ARGV[2]) * 1000000)
local current = tonumber(redis.call('GET', KEYS[1]))
if current and current >= until_us then
  return string.format('%d', current)
end
redis.call('SET', KEYS[1], string.format('%d', until_us), 'PX', math.max(1, math.ceil((until_us - now) / 1000)))
-- Workers hold hits they reserved before the block: the message says how long is left (no clock to agree on).
-- pcall: a user whose ACL refuses the channel still blocks the domain (the workers then learn of it at their
-- next reservation instead).
redis.pcall('PUBLISH', ARGV[3], ARGV[4] .. ' ' .. string.format('%d', until_us - now))
return string.format('%d', until_us)

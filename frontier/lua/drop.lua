-- Empty a domain queue (the domain was blacklisted): the dropped tasks are returned for the crawl's accounting.
--
-- KEYS[1] <job>:{d}:queue
local tasks = redis.call('ZRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return tasks

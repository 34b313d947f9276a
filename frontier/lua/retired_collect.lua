-- Requeue of a retired job, step 1 (master.requeue, through frontier.client): the domain's queue, leases and parked
-- tasks (of paused crawls) move into the outbox.
-- KEYS: queue, inflight, lease scores, outbox, parked. Reply: the outbox's tasks.
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[5]}) do
  local tasks = redis.call('ZRANGE', key, 0, -1)
  for i = 1, #tasks, 500 do
    redis.call('SADD', KEYS[4], unpack(tasks, i, math.min(i + 499, #tasks)))
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
return redis.call('SMEMBERS', KEYS[4])

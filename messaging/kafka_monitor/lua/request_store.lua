-- Leave a request for the Redis monitors (messaging/kafka_monitor/batch.py): store it under its request key, unless
-- that key exists (a redelivered record whose request is still waiting: a no-op), and add it to its kind's stream in
-- the same call, so that a crash can never leave a stored request that no monitor will read. Both keys carry the hash
-- tag {requests} (one slot on a Redis Cluster).
-- KEYS: request key, stream. ARGV: request JSON, TTL in seconds. Reply: 1 stored, 0 already waiting.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return 0 end
redis.call('XADD', KEYS[2], '*', 'key', KEYS[1], 'request', ARGV[1])
return 1

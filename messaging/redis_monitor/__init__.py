"""The Redis monitor (seed 4.1.3): answers the requests the Kafka monitor left in Redis.

Each plugin owns a key pattern (``info:*``, ``statsrequest:*``, ``zk:*``, ``stop:*``); the monitor finds matching keys
with SCAN (every primary of a Redis Cluster), takes a lock per key so that one monitor handles it even when several
run, produces the plugin's answer with the request's ``uuid`` to ``crawlfleet.outbound``, and only then deletes the
request key.

Finding the keys costs one SCAN of the keyspace per plugin and pass (every CRAWLFLEET_REDIS_MONITOR_INTERVAL seconds
while idle): cheap for the request keys' usual numbers, and the interval is the knob on a very large keyspace.
"""

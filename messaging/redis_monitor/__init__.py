"""The Redis monitor (seed 4.1.3): answers the requests the Kafka monitor left in Redis.

Each plugin owns a kind of request (``info``, ``stats``, ``site``, ``stop``) and so one stream
(``requests:{requests}:<kind>``); every monitor reads all its plugins' streams with one blocking read through the
consumer group ``redis-monitor``, so that each request is handled by one monitor even when several run, produces the
plugin's answer with the request's ``uuid`` to ``crawlfleet.outbound``, and only then acknowledges the entry and
deletes the request key. No keyspace scan: a monitor's cost does not grow with the keys in Redis.
"""

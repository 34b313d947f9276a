"""The Kafka monitor (seed 4.1.2, "消息预处理"): crawlfleet's front door.

It consumes ``crawlfleet.incoming`` in a consumer group, recognises and validates each request
(:mod:`messaging.validation`), passes it through an ordered plugin chain that writes it into Redis (crawl requests
into ``seeds`` and ``crawl:<id>``, other kinds into ``info:…``/``statsrequest:…``/``zk:…``/``stop:…`` keys for the
Redis monitor), sends rejections to ``crawlfleet.failed`` and commits only after the Redis write.
"""

"""The names of crawlfleet's modules, as the cluster sees them: in stats keys, alive keys and stats requests.

``stats:<module>:<plugin>:<window>`` and ``stats:<module>:<ip>`` (seed tables 4-4 to 4-6) are keyed by these names, a
stats request names one of them (or :data:`ALL`; ``messaging/schemas/stats.json`` lists the same values, which a
unit test checks), and every long-running process counts under its own. Written here once, so that a counter and the
question about it can never disagree on a spelling.
"""

from __future__ import annotations

KAFKA_MONITOR = "kafka-monitor"
"""The Kafka monitor (intake): ``crawlfleet kafka-monitor``."""

REDIS_MONITOR = "redis-monitor"
"""The Redis monitor (answers): ``crawlfleet redis-monitor``."""

CRAWLER = "crawler"
"""Every Scrapy worker (HTTP statuses per spider type, dupefilter, pipelines): ``crawlfleet worker``."""

MASTER = "master"
"""The masters (dispatch, finished crawls, dead letters): ``crawlfleet master``."""

STATS_MODULES = (KAFKA_MONITOR, REDIS_MONITOR, CRAWLER, MASTER)
"""The modules a stats request may name, in the order an ``all`` answer lists them."""

ALL = "all"
"""A stats request for every module."""

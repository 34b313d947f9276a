import urllib.request

import pytest

from messaging import keys
from messaging.metrics import serve_metrics
from messaging.stats import BUCKETS_PER_WINDOW, RollingCounter, Stats, StepCounter

pytestmark = pytest.mark.integration

T0 = 1_800_000_000.0  # simulated time, aligned to every window


def test_rolling_counter_slides_in_simulated_time(cf):
    counter = RollingCounter(cf.redis(), "stats:test:plugin:60", 60)
    for second in range(0, 60, 5):
        counter.increment(2, now=T0 + second)
    assert counter.value(now=T0 + 59) == 24
    assert counter.value(now=T0 + 65) == 22  # the first 5 s bucket left the window
    assert counter.value(now=T0 + 200) == 0


def test_memory_stays_bounded(cf):
    redis = cf.redis()
    counter = RollingCounter(redis, "stats:test:plugin:60", 60)
    for i in range(2000):
        counter.increment(now=T0 + i * 0.7)
    assert redis.hlen("stats:test:plugin:60") <= BUCKETS_PER_WINDOW + 1
    assert 0 < redis.ttl("stats:test:plugin:60") <= 120


def test_step_counter_counts_per_aligned_period(cf):
    step = StepCounter(cf.redis(), "stats:test:plugin:step3600", 3600)
    step.increment(now=T0 + 10)
    step.increment(3, now=T0 + 3599)
    step.increment(now=T0 + 3600)
    assert step.value(T0) == 4 and step.value(T0 + 3600) == 1
    assert step.periods() == {int(T0): 4, int(T0) + 3600: 1}


def test_stats_api_keys_lifetime_and_heartbeat(cf):
    redis = cf.redis()
    stats = Stats(redis, "kafka-monitor")
    stats.incr("crawl", 3)
    stats.incr("crawl")
    assert stats.value("crawl", 60) == 4
    assert stats.value("crawl", "lifetime") == 4
    assert redis.exists(keys.stats_counter("kafka-monitor", "crawl", 60))
    stats.heartbeat("10.0.0.7", ttl=30)
    assert 0 < redis.ttl(keys.stats_alive("kafka-monitor", "10.0.0.7")) <= 30
    with pytest.raises(ValueError):
        stats.value("crawl", 7)


def test_crawler_status_keys_follow_the_seed(cf):
    redis = cf.redis()
    Stats(redis, "crawler").incr("list:200")
    assert redis.exists("stats:crawler:list:200:60")


def test_metrics_endpoints_do_not_collide(cf):
    first = serve_metrics(cf.settings, "test")
    second = serve_metrics(cf.settings, "test")
    try:
        assert first.port != second.port
        Stats(cf.redis(), "metrics-test").incr("served")
        body = urllib.request.urlopen(first.url, timeout=5).read().decode()
        assert 'crawlfleet_events_total{module="metrics-test",plugin="served"}' in body
        first.register(cf.redis())
        assert cf.redis().keys("metrics:test:*")
    finally:
        first.close()
        second.close()


@pytest.mark.cluster
def test_stats_on_a_redis_cluster(cf_cluster):
    stats = Stats(cf_cluster.redis(), "master")
    stats.incr("dispatched", 5, now=T0)
    stats.incr("dispatched", 2, now=T0 + 30)
    assert stats.value("dispatched", 60, now=T0 + 31) == 7
    assert stats.value("dispatched", "lifetime") == 7

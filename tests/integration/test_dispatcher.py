"""The dispatcher against real Redis: shares, caps, spider types, crash-safe staging, fencing."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.sim_worker import SimWorker
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from master.dispatcher import DispatchConfig, Dispatcher
from master.staging import LeadershipLost, Pick, Staging
from messaging import keys
from messaging.tasks import Task, push_seeds, queue_score

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0


def tasks(n: int, spider_type: str = "list", crawlid: str = "c1", priority: int = 100) -> list[Task]:
    return [Task(url=f"http://{spider_type}{i % 5}.test/p/{i}", crawlid=crawlid, spider_type=spider_type,
                 priority=priority) for i in range(n)]


def with_history(redis, job: str, rate: int, spider_type: str = "list") -> None:
    """A worker that completed ``rate`` tasks in each of the 10 minutes before T0."""
    WorkerRegistry(redis).register(WorkerInfo(job, spider_type, "ip", "h", 1), now=T0 - 11 * 60)
    for minute in range(1, 11):
        record_completion(redis, job, rate, T0 - minute * 60 + 1)
    WorkerRegistry(redis).heartbeat(job, now=T0)


def queued(redis, job: str) -> list[str]:
    found = []
    for domain in redis.smembers(keys.job_domains(job)):
        found += [m.decode() for m in redis.zrange(keys.queue(job, domain.decode()), 0, -1)]
    return found


def test_weighted_shares_when_the_window_cap_binds(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, tasks(5000))
    for job, rate in (("slave1", 360), ("slave2", 420), ("slave3", 480)):
        with_history(redis, job, rate)
    # window of 1 minute at headroom 1: exactly one minute of capacity (1260), split by weight
    config = DispatchConfig(window_minutes=1, headroom=1.0, backlog_minutes=100)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), config)
    result = dispatcher.round(T0)
    assert result.placed == {"slave1": 360, "slave2": 420, "slave3": 480}
    assert dispatcher.round(T0 + 30).total == 0  # the window is full: no flooding
    assert redis.zcard(keys.SEEDS) == 5000 - 1260


def test_backlog_bound_per_worker_and_refill_after_completions(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, tasks(2000))
    with_history(redis, "w", 100)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)),
                            DispatchConfig(headroom=1.2, backlog_minutes=2))
    assert dispatcher.round(T0).placed == {"w": 240}  # 1.2 x 100/min x 2 min
    assert dispatcher.round(T0 + 1).total == 0
    worker = SimWorker(redis, "w", 100)
    worker.step(T0 + 30, 30)  # completes 50
    assert dispatcher.round(T0 + 31).placed == {"w": 50}


def test_tasks_of_a_type_without_workers_wait_without_blocking_others(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, tasks(3000, "universal", priority=200))  # ahead of everything else
    push_seeds(redis, tasks(100, "list"))
    with_history(redis, "lister", 6000)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(scan=5000))
    assert dispatcher.round(T0).placed == {"lister": 100}
    assert redis.zcard(keys.SEEDS) == 3000
    # the next rounds skip the universal run at the head without reading it again
    push_seeds(redis, tasks(150, "list", crawlid="c2"))
    result = dispatcher.round(T0 + 1)
    assert result.placed == {"lister": 150} and result.scanned == 150
    # a universal worker joins: its tasks go to it
    with_history(redis, "universal-1", 6000, "universal")
    assert dispatcher.round(T0 + 2).placed == {"universal-1": 3000}


def test_new_worker_starts_at_the_mean(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, tasks(5000))
    with_history(redis, "old", 400)
    WorkerRegistry(redis).register(WorkerInfo("new", "list", "ip", "h", 1), now=T0)
    config = DispatchConfig(headroom=1.0, backlog_minutes=1)
    placed = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), config).round(T0).placed
    assert placed == {"old": 400, "new": 400}


def test_tasks_keep_priority_order_in_the_queues(cf) -> None:
    redis = cf.redis()
    low = Task(url="http://a.test/low", crawlid="c", spider_type="list", priority=10)
    high = Task(url="http://a.test/high", crawlid="c", spider_type="list", priority=250, depth=3)
    push_seeds(redis, [low, high])
    with_history(redis, "w", 100)
    Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH))).round(T0)
    assert [m.decode() for m in redis.zrange(keys.queue("w", "a.test"), 0, -1)] == [high.encode(), low.encode()]
    assert redis.zscore(keys.queue("w", "a.test"), high.encode()) == queue_score(250, 3)


def picks_of(redis, job: str, n: int) -> list[Pick]:
    found = []
    for raw in redis.zrange(keys.SEEDS, 0, n - 1):
        task = Task.decode(raw)
        found.append(Pick(raw.decode(), job, task.domain, task.crawlid, task.spider_type, 0.0))
    return found


def test_a_master_killed_between_stage_and_land_loses_nothing(cf) -> None:
    redis = cf.redis()
    original = tasks(50)
    push_seeds(redis, original)
    scores_before = dict(redis.zrange(keys.SEEDS, 0, -1, withscores=True))
    old = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    batch, taken = old.stage(picks_of(redis, "w", 30))
    assert len(taken) == 30 and redis.zcard(keys.SEEDS) == 20  # ... and the old leader dies here
    new = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    assert new.recover(minute=0) == (0, 30)
    assert dict(redis.zrange(keys.SEEDS, 0, -1, withscores=True)) == scores_before  # back at their places
    assert int(redis.hget(keys.PENDING_SEEDS, "c1")) == 50
    # the old leader wakes up: it can neither land its batch nor stage another
    assert old.land(batch, taken) == dict.fromkeys({p.domain for p in taken}, False)
    assert queued(redis, "w") == []
    with pytest.raises(LeadershipLost):
        old.stage(picks_of(redis, "w", 5))
    assert not redis.smembers(keys.MASTER_STAGING_EPOCHS)


def test_a_master_killed_between_land_and_settle_duplicates_nothing(cf) -> None:
    redis = cf.redis()
    original = tasks(40)
    push_seeds(redis, original)
    old = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    batch, taken = old.stage(picks_of(redis, "w", 25))
    # the calls of two domains landed (each domain's call is atomic), then the old leader died
    landed = old.land(batch, [p for p in taken if p.domain in ("list0.test", "list1.test")])
    new = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    landed_count, returned = new.recover(minute=0)
    in_queues = queued(redis, "w")
    in_seeds = [m.decode() for m in redis.zrange(keys.SEEDS, 0, -1)]
    assert sorted(in_queues + in_seeds) == sorted(t.encode() for t in original)
    assert landed_count == sum(1 for p in taken if landed.get(p.domain)) and landed_count + returned == 25
    # pending counts: every task counted exactly once, in seeds' slot or in its domain's
    seeds_count = int(redis.hget(keys.PENDING_SEEDS, "c1") or 0)
    domain_counts = sum(int(redis.hget(keys.pending_domain(f"list{i}.test"), "c1") or 0) for i in range(5))
    assert (seeds_count, domain_counts) == (len(in_seeds), len(in_queues))


def test_many_rounds_conserve_tasks_and_counts(cf) -> None:
    redis = cf.redis()
    original = tasks(3000)
    push_seeds(redis, original)
    workers = [SimWorker(redis, f"w{i}", 600 + 300 * i) for i in range(3)]
    for w in workers:
        w.register(T0)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(batch=97))
    now = T0
    while sum(w.completed for w in workers) < 3000:
        dispatcher.round(now)
        now += 5
        for w in workers:
            w.step(now, 5)
        assert now < T0 + 3600
    completed = Counter({w.job: w.completed for w in workers})
    assert completed["w2"] > completed["w1"] > completed["w0"]
    assert redis.zcard(keys.SEEDS) == 0
    assert redis.hgetall(keys.PENDING_SEEDS) == {}
    assert all(not redis.hgetall(keys.pending_domain(f"list{i}.test")) for i in range(5))
    assert redis.smembers(keys.FINISH_CANDIDATES) == {b"c1"}


@pytest.mark.cluster
def test_dispatch_requeue_and_recovery_on_a_redis_cluster(cf_cluster) -> None:
    from master.requeue import Requeuer

    redis = cf_cluster.redis()
    original = tasks(500)
    push_seeds(redis, original)
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    for job in ("a", "b"):
        with_history(redis, job, 6000)
    placed = Dispatcher(redis, epoch, DispatchConfig(batch=111)).round(T0).placed
    assert sum(placed.values()) == 500
    WorkerRegistry(redis).retire("a", now=T0 + 1)
    assert Requeuer(redis, epoch).requeue("a") == placed["a"]
    old = Staging(redis, epoch)
    old.stage(picks_of(redis, "b", 50))
    new = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    assert new.recover(minute=0) == (0, 50)
    in_seeds = [m.decode() for m in redis.zrange(keys.SEEDS, 0, -1)]
    assert sorted(in_seeds + queued(redis, "b")) == sorted(t.encode() for t in original)


def test_dispatch_resumes_within_the_minute_after_a_slow_period(cf) -> None:
    """A worker measured slow (a slow site for the whole window) that becomes fast drains its queues in seconds;
    the next round gives it more at once, not at the next minute of the Redis clock (issue 29, item 5)."""
    from frontier.weights import minute_of

    redis = cf.redis()
    push_seeds(redis, tasks(2000))
    with_history(redis, "w", 10)  # 10 tasks a minute for the last 10 minutes
    redis.hset(keys.dispatched_jobs("list"), f"{minute_of(T0) - 1}:w", 100)  # what it was given in them
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)),
                            DispatchConfig(window_minutes=10, headroom=1.2, backlog_minutes=2))
    assert dispatcher.round(T0).placed == {"w": 20}  # the window's 1.2 x 10 x 10 = 120, less the 100 given
    assert dispatcher.round(T0 + 1).total == 0  # nothing done yet: no flooding
    worker = SimWorker(redis, "w", 600)  # the site is fast again
    assert worker.step(T0 + 5, 5) == 20  # its queues are empty after 5 s
    resumed = dispatcher.round(T0 + 6)
    assert resumed.placed.get("w", 0) >= 20, resumed  # it gets at least what it just proved it can do
    assert minute_of(T0 + 6) == minute_of(T0)  # within the same minute of the Redis clock


def test_a_crawl_of_ones_own_spider_goes_to_its_own_workers_only(cf) -> None:
    """Issue 35: workers of one spider type that serve different crawls (their arguments and egg versions differ)
    get only their crawl's tasks; a rule type's workers still serve every crawl of their type; a task's own Scrapy
    priority orders its site's queue."""
    redis = cf.redis()
    own = "shop.products"
    push_seeds(redis, tasks(40, own, crawlid="books") + tasks(30, own, crawlid="toys") + tasks(20, "list"))
    for job, crawl in (("books-1", "books"), ("books-2", "books"), ("toys-1", "toys")):
        WorkerRegistry(redis).register(WorkerInfo(job, own, "ip", "h", 1, crawlid=crawl), now=T0 - 60)
        WorkerRegistry(redis).heartbeat(job, now=T0)
    with_history(redis, "lister", 600)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(backlog_minutes=100))
    placed = dispatcher.round(T0).placed
    assert placed["books-1"] + placed["books-2"] == 40 and placed["toys-1"] == 30 and placed["lister"] == 20
    for job, crawl in (("books-1", "books"), ("books-2", "books"), ("toys-1", "toys")):
        assert {Task.decode(member).crawlid for member in queued(redis, job)} == {crawl}
    assert WorkerRegistry(redis).infos(["toys-1"])["toys-1"].crawlid == "toys"

    urgent = Task("http://shop.test/a", "urgent", own, request={"fp": "00", "priority": 5})
    plain = Task("http://shop.test/b", "urgent", own, request={"fp": "01"})
    push_seeds(redis, [plain, urgent])
    WorkerRegistry(redis).register(WorkerInfo("urgent-1", own, "ip", "h", 1, crawlid="urgent"), now=T0)
    dispatcher.round(T0 + 1)
    members = redis.zrange(keys.queue("urgent-1", "shop.test"), 0, -1)
    assert [Task.decode(m).url for m in members] == ["http://shop.test/a", "http://shop.test/b"]


def dispatch_resolved(redis, tmp_path, sites, config: DispatchConfig) -> None:
    """Two rounds of a dispatcher whose host map puts a.example.com and b.example.com on 127.37.0.1: the first
    starts the resolution (a task of a new host waits), the second places them."""
    from deploy.procs import wait_for
    from messaging.hostmap import AddressCache, HostMap

    hosts = tmp_path / "hosts"
    hosts.write_text("127.37.0.1 a.example.com b.example.com\n")
    addresses = AddressCache(HostMap.from_file(hosts))
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), config, sites=sites, addresses=addresses)
    try:
        dispatcher.round(T0)
        wait_for(lambda: addresses.address("a.example.com"), 5, "the master's resolution")
        dispatcher.round(T0 + 1)
    finally:
        addresses.close()


def test_each_crawl_is_queued_by_its_own_partition_and_the_shares_follow(cf, tmp_path) -> None:
    """Issue 37, item 2: the queue key of a task is its registered domain, its host or its host's address, as its
    crawl's rule says (the fleet's CRAWLFLEET_PARTITION without one); the address is resolved off the dispatch loop
    (a task whose host is new waits one round); a site's share of the queues is counted per key, with a host's rate
    from its own site config else its domain's."""
    from frontier.config_watch import StaticSiteConfig
    from messaging.siteconfig import Rate, SiteConfig

    redis = cf.redis()
    for crawlid, partition in (("by-host", "host"), ("by-ip", "ip")):
        redis.hset(keys.crawl(crawlid), mapping={"partition": partition})
    urls = [f"http://{host}.example.com/{n}" for host in ("a", "b") for n in range(3)]
    for crawlid in ("by-domain", "by-host", "by-ip"):
        push_seeds(redis, [Task(url=url, crawlid=crawlid, spider_type="list") for url in urls])
    with_history(redis, "w", 6000)
    sites = StaticSiteConfig(Rate(6000, 60), {"example.com": SiteConfig(rate=60, window=60),
                                              "b.example.com": SiteConfig(rate=30, window=60)})
    dispatch_resolved(redis, tmp_path, sites, DispatchConfig(site_minutes=0.05))
    by_key = {key: {Task.decode(m).crawlid for m in redis.zrange(keys.queue("w", key), 0, -1)}
              for key in ("example.com", "a.example.com", "b.example.com", "127.37.0.1")}
    assert by_key == {"example.com": {"by-domain"}, "a.example.com": {"by-host"}, "b.example.com": {"by-host"},
                      "127.37.0.1": {"by-ip"}}
    # shares of 3 s of hits: example.com 60/min -> 3, a.example.com (the domain's rate) 3, b.example.com 30/min -> 2
    assert [redis.zcard(keys.queue("w", key)) for key in ("example.com", "a.example.com", "b.example.com")] == [3, 3, 2]


def test_a_blacklisted_host_of_a_crawl_partitioned_by_ip_is_keyed_by_its_name(cf, tmp_path) -> None:
    """A blacklisted host among an address's sites is queued under its own name, where the worker's take drops it as
    blacklisted (its config or its domain's), instead of among the address's other sites, where it would be fetched."""
    from frontier.config_watch import StaticSiteConfig
    from frontier.politeness import Politeness
    from messaging.siteconfig import Rate, SiteConfig

    redis = cf.redis()
    redis.hset(keys.crawl("by-ip"), mapping={"partition": "ip"})
    push_seeds(redis, [Task(url=f"http://{host}.example.com/1", crawlid="by-ip", spider_type="list")
                       for host in ("a", "b")])
    with_history(redis, "w", 6000)
    sites = StaticSiteConfig(Rate(6000, 60), {"b.example.com": SiteConfig(blacklisted=True)})
    dispatch_resolved(redis, tmp_path, sites, DispatchConfig())
    assert [Task.decode(m).url for m in redis.zrange(keys.queue("w", "127.37.0.1"), 0, -1)] == \
        ["http://a.example.com/1"]
    assert redis.zcard(keys.queue("w", "b.example.com")) == 1
    assert Politeness(sites).is_blacklisted("b.example.com") and not Politeness(sites).is_blacklisted("127.37.0.1")

"""The worker registry against real Redis: joins, heartbeats, completions, leaves with requeue, fencing."""

from __future__ import annotations

import pytest

from bench.sim_worker import SimWorker
from frontier.client import FrontierClient
from frontier.registry import Fenced, WorkerInfo, WorkerRegistry, is_retired, record_completion
from master.dispatcher import DispatchConfig, Dispatcher
from master.requeue import Requeuer
from messaging import keys
from messaging.tasks import Task, push_seeds

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0  # a minute boundary (simulated Redis time)


def tasks(n: int, crawlid: str = "c1") -> list[Task]:
    return [Task(url=f"http://site{i % 7}.test/p/{i}", crawlid=crawlid, spider_type="list") for i in range(n)]


def everywhere(redis, jobs: list[str]) -> list[str]:
    """Every task in seeds, the jobs' queues and leases (with repeats, if any)."""
    found = [m.decode() for m in redis.zrange(keys.SEEDS, 0, -1)]
    for job in jobs:
        for domain in redis.smembers(keys.job_domains(job)):
            for key in (keys.queue(job, domain.decode()), keys.inflight(job, domain.decode())):
                found += [m.decode() for m in redis.zrange(key, 0, -1)]
    return found


def test_join_heartbeat_and_completions_per_minute(cf) -> None:
    redis = cf.redis()
    registry = WorkerRegistry(redis)
    info = registry.register(WorkerInfo("job-1", "list", "10.0.0.1", "host-a", 4242), now=T0)
    assert info.started == T0
    assert registry.live() == {"job-1": T0}
    assert registry.infos(["job-1"])["job-1"].spider_type == "list"
    assert registry.heartbeat("job-1", busy=True, now=T0 + 61)
    record_completion(redis, "job-1", 5, T0 + 62)
    minute = int((T0 + 61) // 60)
    assert registry.activity(["job-1"], [f"d{minute}", f"b{minute}", "done"]) == {"job-1": [5, 1, 5]}
    assert registry.expired(ttl=15, now=T0 + 70) == []
    assert registry.expired(ttl=15, now=T0 + 77) == ["job-1"]
    # an unregistered job is told to register
    assert registry.heartbeat("job-2", now=T0) is False


def test_a_late_heartbeat_saves_a_worker_from_retirement(cf) -> None:
    registry = WorkerRegistry(cf.redis())
    registry.register(WorkerInfo("job-1", "list", "ip", "h", 1), now=T0)
    registry.heartbeat("job-1", now=T0 + 20)
    assert not registry.retire("job-1", deadline=T0 + 5, now=T0 + 21)  # its heartbeat is newer than the deadline
    assert registry.live() == {"job-1": T0 + 20}


def test_a_retired_job_is_fenced(cf) -> None:
    redis = cf.redis()
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("job-1", "list", "ip", "h", 1), now=T0)
    assert registry.retire("job-1", deadline=T0, now=T0 + 30)
    assert is_retired(redis, "job-1")
    assert registry.live() == {}
    with pytest.raises(Fenced):
        registry.heartbeat("job-1", now=T0 + 31)
    with pytest.raises(Fenced):
        record_completion(redis, "job-1", 3, T0 + 31)
    with pytest.raises(Fenced):
        registry.register(WorkerInfo("job-1", "list", "ip", "h", 1), now=T0 + 32)
    assert registry.live() == {}
    assert not registry.retire("job-1", now=T0 + 33)  # already retired


def test_leave_requeues_queues_and_leases_conserving_every_task(cf) -> None:
    redis = cf.redis()
    original = tasks(300)
    push_seeds(redis, original)
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    dispatcher = Dispatcher(redis, epoch, DispatchConfig(initial_rate=60, headroom=1.0, backlog_minutes=1.0))
    a, b = SimWorker(redis, "job-a", 60), SimWorker(redis, "job-b", 60)
    a.register(T0)
    b.register(T0)
    assert dispatcher.round(T0).placed == {"job-a": 60, "job-b": 60}
    leased = a.lease(20, T0 + 1)  # job-a holds 20 leases and 40 queued tasks when it dies
    assert len(leased) == 20
    b.registry.heartbeat("job-b", now=T0 + 10)  # job-b stays alive
    registry = WorkerRegistry(redis)
    assert registry.expired(ttl=15, now=T0 + 20) == ["job-a"]
    assert registry.retire("job-a", deadline=T0 + 5, now=T0 + 20)
    assert Requeuer(redis, epoch).requeue("job-a") == 60
    found = everywhere(redis, ["job-a", "job-b"])
    assert sorted(found) == sorted(t.encode() for t in original)  # nothing lost, nothing twice
    assert not redis.exists(keys.job_domains("job-a"))
    # the dead job's late ack finds nothing to acknowledge, and its completions are refused
    assert a.ack(leased, T0 + 21) == 0
    with pytest.raises(Fenced):
        record_completion(redis, "job-a", 1, T0 + 21)
    # the returned tasks are dispatched again, to the live worker only
    registry.heartbeat("job-b", now=T0 + 21)
    placed = Dispatcher(redis, epoch, DispatchConfig(initial_rate=6000)).round(T0 + 22).placed
    assert set(placed) == {"job-b"}
    assert sorted(everywhere(redis, ["job-b"])) == sorted(t.encode() for t in original)
    assert redis.zcard(keys.SEEDS) == 0
    # the crawl's pending counts still account for every task
    counts = sum(int(redis.hget(keys.pending_domain(f"site{i}.test"), "c1") or 0) for i in range(7))
    assert counts == 300
    assert redis.hget(keys.PENDING_SEEDS, "c1") is None


def test_a_requeue_interrupted_after_reseeding_is_finished_once(cf, monkeypatch: pytest.MonkeyPatch) -> None:
    redis = cf.redis()
    original = tasks(10)
    push_seeds(redis, original)
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    WorkerRegistry(redis).register(WorkerInfo("job-a", "list", "ip", "h", 1), now=T0)
    Dispatcher(redis, epoch, DispatchConfig(initial_rate=6000)).round(T0)
    assert redis.zcard(keys.SEEDS) == 0
    requeuer = Requeuer(redis, epoch)

    def crash(*args, **kwargs) -> None:
        raise ConnectionError("the leader died after putting the tasks back into seeds")

    WorkerRegistry(redis).retire("job-a", now=T0 + 30)
    with monkeypatch.context() as patched:  # step 3 of the requeue (the frontier client's release) never runs
        patched.setattr(FrontierClient, "release_retired", crash)
        with pytest.raises(ConnectionError):
            requeuer.requeue("job-a")
    assert 0 < redis.zcard(keys.SEEDS) < 10  # one domain's tasks are back in seeds, still in its outbox too
    # the next leader finds the unfinished requeue and completes it without adding anything twice
    next_epoch = int(redis.incr(keys.MASTER_EPOCH))
    successor = Requeuer(redis, next_epoch)
    assert successor.pending_jobs(["job-a"]) == ["job-a"]
    successor.requeue("job-a")
    assert sorted(everywhere(redis, ["job-a"])) == sorted(t.encode() for t in original)
    assert successor.pending_jobs(["job-a"]) == []
    assert int(redis.hget(keys.PENDING_SEEDS, "c1")) == 10
    assert all(not redis.hget(keys.pending_domain(f"site{i}.test"), "c1") for i in range(7))

"""What the pages and ``/api`` show of the whole cluster, read from Redis (and MongoDB for items).

Blocking reads: the web layer calls these through ``deferToThread``. They read what the demo's progress view
reads (``deploy.progress``, which this floor may not import): the worker registry (``frontier.registry``) with each
worker's weight as the master computes it (``frontier.weights.measure``: completions per busy minute over the window)
and its speed (completions in the last whole minute), its queued and leased tasks (``<job>:domains``, then each
domain's queue and leases), the depth of ``seeds``, the crawler's counters (``stats:crawler:<type>:<status>:60``:
pages of the last minute by spider type and HTTP status, via the Redis monitor's own
:func:`~messaging.redis_monitor.plugins.stats.module_stats`) and each crawl's hash.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from frontier.client import FrontierReader
from frontier.registry import WorkerRegistry
from frontier.weights import measure, minute_of
from manager.registry import ManagerRegistry
from messaging import keys, modules
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.redis_monitor.crawl_tasks import INFLIGHT, QUEUE, task_keys
from messaging.redis_monitor.plugins.stats import module_stats
from messaging.settings import load as load_settings
from messaging.tasks import CrawlFields, Task

CRAWLS_SHOWN = 100
TASKS_SCANNED = 200_000  # bound of the one pass over queues and leases that splits them by crawl
PAGES_WINDOW = "60"  # the crawler counter window that is "pages per minute"


def workers(redis: Any, window_minutes: int, heartbeat_ttl: float | None = None,
            slow_after: float | None = None) -> list[dict[str, Any]]:
    """Every registered worker with its weight, speed, depths and state (``ok``, ``slow``: heartbeats on time but
    its feed thread behind, ``gone``: about to be retired); the thresholds default to the settings."""
    if heartbeat_ttl is None or slow_after is None:
        settings = load_settings()
        heartbeat_ttl = settings.heartbeat_ttl if heartbeat_ttl is None else heartbeat_ttl
        slow_after = settings.worker_slow_after if slow_after is None else slow_after
    registry = WorkerRegistry(redis)
    live = registry.live()
    infos = registry.infos(live)
    now = RedisClock(redis).now()
    rates = measure(registry, {job: info.started for job, info in infos.items()}, now, window_minutes) \
        if infos else {}
    last = f"d{minute_of(now) - 1}"
    activity = registry.activity(list(infos), [last, "done"])
    depths = FrontierReader(redis).queue_depths(list(infos))
    health = registry.health(now, heartbeat_ttl, slow_after)
    result = []
    for job, info in sorted(infos.items()):
        rate = rates[job].rate if job in rates else None
        job_health = health.get(job)
        result.append({
            "job": job, "spider_type": info.spider_type, "host": info.host, "ip": info.ip, "pid": info.pid,
            "weight": None if rate is None else round(rate, 2), "speed": activity[job][0],
            "completed": activity[job][1], "queued": depths[job][0], "leased": depths[job][1],
            "last_heartbeat": live.get(job), "started": info.started,
            "state": job_health.state if job_health is not None else "gone",
            "lag": round(job_health.lag, 1) if job_health is not None and job_health.lag is not None else None,
        })  # fmt: skip
    return result


def nodes(redis: Any, window_minutes: int, manager_ttl: float) -> dict[str, Any]:
    """Every manager and every worker of the cluster (seed: "choose the host")."""
    managers = [m.to_json() for m in ManagerRegistry(redis, manager_ttl).live()]
    return {"managers": managers, "workers": workers(redis, window_minutes), "time": RedisClock(redis).now()}


def stats(redis: Any, window_minutes: int) -> dict[str, Any]:
    """The counters for the *Stats* page: pages per minute by spider type and status, queue depths, workers."""
    crawler = module_stats(redis, modules.CRAWLER)
    pages: dict[str, dict[str, int]] = {}
    for spider_type, statuses in crawler.get("spider_types", {}).items():
        pages[spider_type] = {status: int(windows.get(PAGES_WINDOW, 0)) for status, windows in statuses.items()}
    fleet = workers(redis, window_minutes)
    return {
        "time": RedisClock(redis).now(),
        "pages_per_minute": pages,
        "seeds": int(redis.zcard(keys.SEEDS)),
        "queued": sum(w["queued"] for w in fleet),
        "leased": sum(w["leased"] for w in fleet),
        "workers": fleet,
        "managers": int(redis.zcard(keys.MANAGERS)),
        modules.CRAWLER: crawler,
        "master": module_stats(redis, "master"),
    }  # fmt: skip


def crawls(redis: Any, limit: int = CRAWLS_SHOWN) -> list[dict[str, Any]]:
    """The latest crawls with their progress: pages, items, tasks in seeds, queued, leased, state."""
    ids = [as_text(c) for c in redis.smembers(keys.CRAWLS)]
    pipe = redis.pipeline(transaction=False)
    for crawlid in ids:
        pipe.hgetall(keys.crawl(crawlid))
    pipe.hgetall(keys.PENDING_SEEDS)
    *hashes, in_seeds = pipe.execute()
    seeds = {as_text(k): int(v) for k, v in in_seeds.items()}
    rows: list[dict[str, Any]] = []
    for crawlid, raw in zip(ids, hashes, strict=True):
        data = {as_text(k): as_text(v) for k, v in raw.items()}
        rows.append({
            "crawlid": crawlid, "state": data.get(CrawlFields.STATE, "unknown"),
            "spider_type": data.get(CrawlFields.SPIDER_TYPE, ""), "url": data.get(CrawlFields.URL, ""),
            "userid": data.get(CrawlFields.USERID, ""), "created": _float(data.get(CrawlFields.CREATED)),
            "finished": _float(data.get(CrawlFields.FINISHED)), "pages": int(_float(data.get(CrawlFields.PAGES))),
            "items": int(_float(data.get(CrawlFields.ITEMS))), "enqueued": int(_float(data.get(CrawlFields.ENQUEUED))),
            "seeds": seeds.get(crawlid, 0), "queued": 0, "leased": 0,
        })  # fmt: skip
    rows.sort(key=lambda row: row["created"], reverse=True)
    rows = rows[:limit]
    by_id = {row["crawlid"]: row for row in rows}
    for crawlid, (queued, leased) in _queued_and_leased(redis).items():
        if crawlid in by_id:
            by_id[crawlid]["queued"], by_id[crawlid]["leased"] = queued, leased
    return rows


def _queued_and_leased(redis: Any) -> dict[str, tuple[int, int]]:
    """One pass over every job's queues and leases (bounded), counting tasks by crawl."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    seen = 0
    for key, where in task_keys(redis):
        if where not in (QUEUE, INFLIGHT):
            continue
        for member, _ in redis.zscan_iter(key, count=1000):
            seen += 1
            if seen > TASKS_SCANNED:
                return {c: (q, li) for c, (q, li) in counts.items()}
            try:
                crawlid = Task.decode(member).crawlid
            except (ValueError, TypeError):
                continue
            counts[crawlid][0 if where == QUEUE else 1] += 1
    return {c: (q, li) for c, (q, li) in counts.items()}


def latest_items(mongo_db: Any, crawlid: str, limit: int = 20) -> list[dict[str, Any]]:
    """The crawl's latest stored items (url, title, fetched_at, status): crawled strings, escaped by the pages."""
    try:
        cursor = mongo_db[crawlid].find({}, {"_id": 0, "url": 1, "title": 1, "fetched_at": 1, "status": 1}) \
            .sort("fetched_at", -1).limit(limit)
        return [dict(doc) for doc in cursor]
    except Exception:  # MongoDB away: the page shows the Redis counts without items
        return []


def _float(value: str | None) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0

"""Why a crawl waits: what keeps its tasks from being fetched right now, each reason with its figures (issue 37).

Read by the Redis monitor's info plugin (the ``waiting`` field of the info answer, ``crawlfleet info``) and by the
managers' crawl page. Two sources:

- **tasks in ``seeds``**: the leading master publishes, at most once a second, why its latest look left each
  crawl's tasks there (``master:{seeds}:waits``, ``master.waits``) and the room it found per spider type
  (``master:{seeds}:room``). ``paced``: the domain holds its share of the workers' queues (a few minutes of its
  own hits) and the rest waits in ``seeds``; ``backlog_full``: every worker of the crawl's spider type is at its
  bound; ``no_worker``: no live worker of its spider type. Tasks the record does not explain (it is older than
  RECORD_SECONDS, or the round that wrote it did not reach them because nothing had room) are explained by the
  room: no worker, or a full backlog.
- **tasks in the workers' queues**, read now for a few of the crawl's domains that hold some: ``blocked`` (the site
  answered 429/503 with a Retry-After), ``robots`` (the host's robots.txt is unreachable, or being fetched: its
  tasks wait), ``paced`` (the site's next slot is later: its rate and when).
- **items in the workers**: ``storage`` (issue 40): a live worker of the crawl's spider type holds items of the crawl
  that its store has refused to write for a few seconds (``messaging.storage``: since when, the server's reason, the
  items waiting, in how many workers). It comes first: nothing of the crawl completes while it lasts.

Every reason is a dict with ``reason``, ``tasks`` (how many wait for it) and its figures; :func:`describe` says it in
one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from messaging import keys, storage
from messaging.clients import RedisClient, as_text
from messaging.domains import authority, robots_tag
from messaging.siteconfig import Rate, SitePaths, for_key, read_defaults, read_site, site_names
from messaging.tasks import CrawlFields, CrawlState, Task

PACED, ROBOTS, BLOCKED, BACKLOG_FULL, NO_WORKER = "paced", "robots", "blocked", "backlog_full", "no_worker"
STORAGE = "storage"
RECORD_SECONDS = 30.0  # a record of the master older than this is not trusted
DOMAINS_LOOKED_AT = 200  # of a crawl's domains, at most this many are asked whether they hold its tasks
SAMPLE = 10  # queued tasks read per job and domain to find the hosts they wait on
SLOT_SLACK = 1.0  # a next slot sooner than this is "due", not a wait
US = 1_000_000

RateFor = Callable[[str], "Rate | None"]


def zk_rates(zk: Any, paths: SitePaths) -> RateFor:
    """A site's rate as the workers apply it (its znode, else the defaults), read from ZooKeeper, memoized; None
    while ZooKeeper does not answer (the reasons are given without their rates)."""
    seen: dict[str, Rate | None] = {}
    defaults: list[Rate] = []

    def rate_for(domain: str) -> Rate | None:
        if domain not in seen:
            try:
                if not defaults:
                    defaults.append(read_defaults(zk, paths))
                config = for_key([read_site(zk, paths, name) for name in site_names(domain)])  # a host: its own
                seen[domain] = config.effective_rate(defaults[0])  # config, else its registered domain's
            except Exception:  # ZooKeeper away: a reason without its figure beats no answer
                seen[domain] = None
        return seen[domain]

    return rate_for


def crawl_waits(redis: RedisClient, crawlid: str, rate_for: RateFor, limit: int = 10) -> list[dict[str, Any]]:
    """Why the running crawl's tasks wait now (see the module docstring); [] when nothing holds it back."""
    state, spider_type = (as_text(v) if v is not None else "" for v in
                          redis.hmget(keys.crawl(crawlid), [CrawlFields.STATE, CrawlFields.SPIDER_TYPE]))
    if state != CrawlState.RUNNING:
        return []
    seconds, micros = redis.time()
    now = seconds + micros / US
    jobs = _live_jobs(redis, spider_type)
    waits = _in_workers(redis, crawlid, jobs)
    waits += _in_seeds(redis, crawlid, spider_type, jobs, now)
    waits += _in_queues(redis, crawlid, spider_type, jobs, now, limit)
    for wait in waits:
        rate = rate_for(wait["domain"]) if wait["reason"] == PACED else None
        if rate is not None:
            wait.update(rate=rate.hits, window=rate.window, spacing=rate.spacing if rate.hits else None)
    _next_slots(redis, spider_type, [w for w in waits if w["reason"] == PACED], now, rate_for)
    # a queued domain whose next slot is now is not waiting for its pace: it is being fetched
    return [w for w in waits if not (w["reason"] == PACED and w.get("where") == "queues"
                                     and (w["next_slot_in"] or 0.0) < SLOT_SLACK)][:limit]


def describe(wait: dict[str, Any]) -> str:
    """One line for a person: the reason and its figures."""
    reason, tasks = wait["reason"], wait.get("tasks", 0)
    if reason == PACED:
        rate = Rate(int(wait["rate"]), float(wait["window"])).describe() if wait.get("rate") is not None else "?"
        slot = wait.get("next_slot_in")
        slot_text = ("next slot unknown" if slot is None else f"next slot in {slot:.1f} s" if slot > 0
                     else "next slot now")
        where = (f"{tasks} wait in seeds ({wait['held']} in the workers' queues, its share is {wait['quota']})"
                 if wait.get("where") == "seeds" else f"{tasks} in the workers' queues")
        return f"paced: {wait['domain']} allows {rate}; {slot_text}; {where}"
    if reason == ROBOTS:
        if wait.get("state") == "fetching":
            return f"robots.txt pending: {wait['host']}'s robots.txt is being fetched; {tasks} tasks wait"
        return (f"robots.txt pending: {wait['host']} unreachable for {wait['down_for']:.0f} s "
                f"({wait.get('why') or 'no answer'}, {wait.get('failures', 0)} tries), next try in "
                f"{wait['retry_in']:.0f} s; {tasks} tasks wait")
    if reason == BLOCKED:
        return (f"blocked: {wait['domain']} asked for a pause (429/503), {wait['until_in']:.0f} s left; "
                f"{tasks} tasks wait")
    if reason == STORAGE:
        return storage.describe(wait["since"], wait["why"], wait["items"], wait.get("workers", 1))
    if reason == BACKLOG_FULL:
        return (f"backlog full: every {wait['spider_type']} worker holds its bound ({wait.get('held', '?')} tasks "
                f"held of {wait.get('bound', '?')}); {tasks} tasks wait in seeds")
    return f"no worker of type {wait['spider_type']}: {tasks} tasks wait in seeds"


# --- items in the workers ----------------------------------------------------------------------------------------
def _in_workers(redis: RedisClient, crawlid: str, jobs: list[str]) -> list[dict[str, Any]]:
    """The crawl's items held by workers whose store refuses writes (one wait, however many workers)."""
    holding = [state for state in storage.read(redis, jobs).values() if state.crawls.get(crawlid)]
    if not holding:
        return []
    first = min(holding, key=lambda state: state.since)
    return [{"reason": STORAGE, "since": first.since, "why": first.reason, "kind": first.kind, "store": first.store,
             "items": sum(state.crawls[crawlid] for state in holding), "workers": len(holding)}]


# --- tasks in seeds ----------------------------------------------------------------------------------------------
def _in_seeds(redis: RedisClient, crawlid: str, spider_type: str, jobs: list[str], now: float) -> list[dict[str, Any]]:
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.PENDING_SEEDS, crawlid)
    pipe.hget(keys.DISPATCH_WAITS, crawlid)
    pipe.hget(keys.DISPATCH_ROOM, spider_type)
    in_seeds, raw_record, raw_room = pipe.execute()
    left = int(in_seeds or 0)
    if left <= 0:
        return []
    room = json.loads(raw_room) if raw_room else {}
    record = json.loads(raw_record) if raw_record else {}
    waits: list[dict[str, Any]] = []
    if now - float(record.get("at", -1e18)) <= RECORD_SECONDS:
        for wait in record.get("waits", []):
            tasks = min(left, int(wait.get("tasks", 0)))
            if tasks <= 0:
                continue
            left -= tasks
            wait = {**wait, "tasks": tasks, "where": "seeds"}
            if wait["reason"] == BACKLOG_FULL:
                wait.update(_room_figures(room))
            waits.append(wait)
    if left > 0:  # not in the record: explained by the room the master found
        if not jobs:
            waits.append({"reason": NO_WORKER, "spider_type": spider_type, "tasks": left, "where": "seeds"})
        elif room and int(room.get("budget", 1)) <= 0 and now - float(room.get("at", -1e18)) <= RECORD_SECONDS:
            waits.append({"reason": BACKLOG_FULL, "spider_type": spider_type, "tasks": left, "where": "seeds",
                          **_room_figures(room)})
    return waits


def _room_figures(room: dict[str, Any]) -> dict[str, Any]:
    return {name: room[name] for name in ("workers", "idle", "held", "bound") if name in room}


def _live_jobs(redis: RedisClient, spider_type: str) -> list[str]:
    jobs = [as_text(job) for job in redis.zrange(keys.WORKERS, 0, -1)]
    pipe = redis.pipeline(transaction=False)
    for job in jobs:
        pipe.hget(keys.worker(job), "spider_type")
    return [job for job, kind in zip(jobs, pipe.execute() if jobs else [], strict=True)
            if kind is not None and as_text(kind) == spider_type]


# --- tasks in the workers' queues ----------------------------------------------------------------------------------
def _in_queues(redis: RedisClient, crawlid: str, spider_type: str, jobs: list[str], now: float,
               limit: int) -> list[dict[str, Any]]:
    domains = [as_text(d) for d in redis.srandmember(keys.crawl_domains(crawlid), DOMAINS_LOOKED_AT) or []]
    pipe = redis.pipeline(transaction=False)
    for domain in domains:
        pipe.hget(keys.pending_domain(domain), crawlid)
    held = {d: int(n) for d, n in zip(domains, pipe.execute() if domains else [], strict=True) if n and int(n) > 0}
    busy = sorted(held, key=held.__getitem__, reverse=True)[:limit]
    if not busy:
        return []
    hosts = _hosts(redis, crawlid, jobs, busy)
    pipe = redis.pipeline(transaction=False)
    for domain in busy:
        pipe.get(keys.block(domain))
    blocks = dict(zip(busy, pipe.execute(), strict=True))
    pipe = redis.pipeline(transaction=False)
    pairs = [(domain, host) for domain in busy for host in hosts.get(domain, [])]
    for _, host in pairs:  # robots.txt is kept per host under its registered domain, whatever the queue's key
        registered = robots_tag(host)
        pipe.exists(keys.robots(registered, host))
        pipe.hgetall(keys.robots_down(registered, host))
        pipe.exists(keys.robots_lock(registered, host))
    replies = pipe.execute() if pairs else []
    robots: dict[str, dict[str, Any]] = {}
    for index, (domain, host) in enumerate(pairs):
        cached, down, lock = replies[3 * index:3 * index + 3]
        if cached or domain in robots:
            continue
        if down:
            down = {as_text(k): as_text(v) for k, v in down.items()}
            robots[domain] = {"reason": ROBOTS, "state": "unreachable", "host": host, "domain": domain,
                              "down_for": max(0.0, now - float(down.get("since", now))),
                              "retry_in": max(0.0, float(down.get("retry_at", now)) - now),
                              "failures": int(float(down.get("failures", 0))), "why": down.get("why", "")}
        elif lock:
            robots[domain] = {"reason": ROBOTS, "state": "fetching", "host": host, "domain": domain}
    waits = []
    for domain in busy:
        until = blocks.get(domain)
        if until is not None and int(until) / US > now:
            waits.append({"reason": BLOCKED, "domain": domain, "tasks": held[domain],
                          "until_in": int(until) / US - now})
        elif domain in robots:
            waits.append({**robots[domain], "tasks": held[domain]})
        else:
            waits.append({"reason": PACED, "domain": domain, "tasks": held[domain], "where": "queues"})
    return waits


def _hosts(redis: RedisClient, crawlid: str, jobs: list[str], domains: list[str]) -> dict[str, list[str]]:
    """The hosts of the crawl's queued tasks in each domain, from the first few tasks of each job's queue."""
    pipe = redis.pipeline(transaction=False)
    pairs = [(job, domain) for job in jobs for domain in domains]
    for job, domain in pairs:
        pipe.zrange(keys.queue(job, domain), 0, SAMPLE - 1)
    found: dict[str, list[str]] = {}
    for (_job, domain), members in zip(pairs, pipe.execute() if pairs else [], strict=True):
        for member in members:
            try:
                task = Task.decode(member)
            except (ValueError, TypeError):
                continue
            host = authority(task.url)
            if task.crawlid == crawlid and robots_tag(host) and host not in found.setdefault(domain, []):
                found[domain].append(host)
    return found


def _next_slots(redis: RedisClient, spider_type: str, waits: list[dict[str, Any]], now: float,
                rate_for: RateFor) -> None:
    """Each paced wait's ``next_slot_in`` (seconds): when the domain's token bucket for the spider type (the one every
    host shares, ``frontier/lua/pace.lua``) gives its next token."""
    if not waits:
        return
    pipe = redis.pipeline(transaction=False)
    for wait in waits:
        pipe.hmget(keys.pace_type(spider_type, wait["domain"]), ["at", "tokens"])
    for wait, (at, tokens) in zip(waits, pipe.execute(), strict=True):
        rate = rate_for(wait["domain"])
        wait["next_slot_in"] = _slot_in(at, tokens, rate, now)


def _slot_in(at: Any, tokens: Any, rate: Rate | None, now: float) -> float | None:
    if rate is None or not rate.hits:
        return None  # the rate is unknown, or no hit is allowed at all
    if at is None or tokens is None:
        return 0.0
    last, left, spacing = int(at) / US, float(tokens), rate.spacing
    base = max(now, last)
    if min(rate.burst, left + (base - last) / spacing) < 1:
        base = last + (1 - left) * spacing
    return max(0.0, base - now)

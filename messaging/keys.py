"""Every Redis key crawlfleet uses, in one place (ARCHITECTURE.md, "Redis keys").

No other module formats a key string: components call these functions, so that the layout (and the Redis Cluster
hash tags) can be read and changed here alone. ``{…}`` marks a hash tag: every key of one domain lives in the same
cluster slot, so that one Lua call can touch a worker's queue, its leases and both throttle windows of a domain.
Seed names (``seeds``, ``stats:…``, ``info:…``) are kept where the seed gives them.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- global queue and crawls -------------------------------------------------------------------------------------
SEEDS = "seeds"
"""zset: the global task queue; score from priority and arrival order (lower pops first)."""

SEEDS_SEQUENCE = "seeds:sequence"
"""string: arrival counter, so that tasks of one priority pop first-in first-out."""

CRAWLS = "crawls"
"""set: crawl ids that are known (running, stopped or finished, until their TTL)."""


def crawl(crawlid: str) -> str:
    """hash: the crawl's rule, spider type, user, limits, state and counts."""
    return f"crawl:{crawlid}"


# --- a worker's domain queues and leases (hash tag: the domain) --------------------------------------------------
def queue(job: str, domain: str) -> str:
    """zset: job's tasks for one domain (score: priority order)."""
    return f"{job}:{{{_tag(domain)}}}:queue"


def inflight(job: str, domain: str) -> str:
    """zset: job's leased tasks for one domain (score: lease deadline, Redis clock)."""
    return f"{job}:{{{_tag(domain)}}}:inflight"


def lease_scores(job: str, domain: str) -> str:
    """hash: leased task -> its queue score, so that an expired lease goes back to its place in the queue."""
    return f"{job}:{{{_tag(domain)}}}:leasescores"


def job_domains(job: str) -> str:
    """set: the domains for which the job has (or recently had) a queue; spares the master a SCAN."""
    return f"{job}:domains"


def queue_pattern(job: str = "*") -> str:
    """SCAN pattern of domain queues (of one job, or every job)."""
    return f"{job}:{{*}}:queue"


def inflight_pattern(job: str = "*") -> str:
    return f"{job}:{{*}}:inflight"


@dataclass(frozen=True)
class DomainKey:
    owner: str  # a job, a spider type or an IP
    domain: str
    kind: str  # queue, inflight, throttle


def parse_domain_key(key: str | bytes) -> DomainKey:
    """Split ``<owner>:{<domain>}:<kind>`` back into its parts."""
    text = key.decode() if isinstance(key, bytes) else key
    head, sep, rest = text.partition(":{")
    domain, sep2, kind = rest.rpartition("}:")
    if not (sep and sep2 and domain and head):
        raise ValueError(f"not a domain-scoped key: {text!r}")
    return DomainKey(head, domain, kind)


# --- politeness (hash tag: the domain) ---------------------------------------------------------------------------
def throttle_type(spider_type: str, domain: str) -> str:
    """zset: hits of one spider type on the domain, from every host (seed 4.2.2.2); exact sliding window."""
    return f"{spider_type}:{{{_tag(domain)}}}:throttle"


def throttle_ip(ip: str, domain: str) -> str:
    """zset: hits from one host IP identity on the domain, of every spider type (seed 4.2.2.3)."""
    return f"{ip}:{{{_tag(domain)}}}:throttle"


def block(domain: str) -> str:
    """string: the domain is blocked cluster-wide until this Redis time (Retry-After of a 429/503)."""
    return f"block:{{{_tag(domain)}}}"


def robots(domain: str) -> str:
    """string: the cached robots.txt of the domain, shared by every worker, with a TTL."""
    return f"robots:{{{_tag(domain)}}}"


def robots_lock(domain: str) -> str:
    """string with TTL: one process of the cluster is fetching the domain's robots.txt."""
    return f"robots:{{{_tag(domain)}}}:lock"


def hit_sequence(domain: str) -> str:
    """string: counter that makes every throttle hit a unique zset member."""
    return f"hits:{{{_tag(domain)}}}:sequence"


# --- dedup -------------------------------------------------------------------------------------------------------
def bloom_meta(namespace: str) -> str:
    """hash: a Bloom filter's layout (capacity, error rate, groups, layers, inserted count)."""
    return f"bloom:{namespace}:meta"


def bloom_part(namespace: str, shard: int, layer: int, part: int) -> str:
    """string: one part of a Bloom filter's bit (or counter) array; the shard is the hash tag."""
    return f"bloom:{namespace}:{{s{shard}}}:l{layer}:p{part}"


def bloom_pattern(namespace: str) -> str:
    return f"bloom:{namespace}:*"


# --- registries --------------------------------------------------------------------------------------------------
WORKERS = "workers"
"""zset: job ids by last heartbeat (Redis time)."""


def worker(job: str) -> str:
    """hash: job id, spider type, ip, host, pid, start time, completions."""
    return f"worker:{job}"


RETIRED_WORKERS = "workers:retired"
"""zset: job ids declared dead (fenced: their later writes are refused), by retirement time."""

MANAGERS = "managers"
"""zset: manager hosts by last heartbeat."""


def manager(host: str) -> str:
    """hash: a manager's API URL and node name."""
    return f"manager:{host}"


# --- master ------------------------------------------------------------------------------------------------------
MASTER_EPOCH = "master:epoch"
"""string: the epoch of the dispatcher leader allowed to write (fencing)."""


def master_staging(epoch: int | str) -> str:
    """list: tasks taken from ``seeds`` by the leader of this epoch and not yet in a worker queue."""
    return f"master:staging:{epoch}"


# --- stats (seed tables 4-4, 4-5, 4-6) ---------------------------------------------------------------------------
def stats_counter(module: str, plugin: str, window: str | int) -> str:
    """counter: what a module's plugin did in the window (seconds, or ``lifetime``)."""
    return f"stats:{module}:{plugin}:{window}"


def stats_alive(module: str, ip: str) -> str:
    """string with TTL: the module runs on that host."""
    return f"stats:{module}:{ip}"


def stats_crawler(spider_type: str, status: int | str, window: str | int) -> str:
    """counter: responses of a spider type with an HTTP status in the window."""
    return f"stats:crawler:{spider_type}:{status}:{window}"


def metrics_endpoint(module: str, host: str, pid: int) -> str:
    """string with TTL: where a process serves its Prometheus /metrics."""
    return f"metrics:{module}:{host}:{pid}"


# --- requests waiting for the Redis monitor ----------------------------------------------------------------------
def info_request(userid: str, crawlid: str, uuid: str) -> str:
    return f"info:{userid}:{crawlid}:{uuid}"


def stats_request(userid: str, stats: str, uuid: str) -> str:
    return f"statsrequest:{stats}:{userid}:{uuid}"


def zk_request(action: str, domain: str, userid: str, uuid: str) -> str:
    return f"zk:{action}:{domain}:{userid}:{uuid}"


def stop_request(userid: str, crawlid: str, uuid: str) -> str:
    return f"stop:{userid}:{crawlid}:{uuid}"


def monitor_lock(key: str) -> str:
    """string with TTL: the Redis monitor that handles ``key`` holds this."""
    return f"lock:{key}"


def intake_seen(digest: str) -> str:
    """string with TTL: a request with this content hash was already enqueued (redelivery guard)."""
    return f"intake:seen:{digest}"


def _tag(domain: str) -> str:
    if not domain:
        raise ValueError("a domain-scoped key needs a non-empty domain")
    if "{" in domain or "}" in domain:
        raise ValueError(f"a domain cannot contain braces: {domain!r}")
    return domain

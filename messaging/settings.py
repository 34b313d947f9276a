"""One settings source for every crawlfleet component.

Every setting is an environment variable ``CRAWLFLEET_<NAME>``. Its value comes from, in order:

1. the process environment;
2. the local run's state file (``$CRAWLFLEET_RUN_DIR/state.json``, written by ``crawlfleet services up``), which
   supplies the connection settings of the services it started;
3. the built-in default below.

The Scrapy settings module, the CLI, the master, the monitors and the manager all read :func:`load`, so one
``export`` (or ``crawlfleet env``) configures a whole host. Every setting is declared here with its documentation:
``crawlfleet settings`` prints the table, and the README's configuration table is generated from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from messaging import request_kinds
from messaging.settings_fields import SettingsFields

PREFIX = "CRAWLFLEET_"


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {value!r}")


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    doc: str
    group: str
    parse: Callable[[str], Any] = str
    state_key: str | None = None  # the state-file field that supplies a default for a local run
    secret: bool = False  # a password, a key or a URL that may carry a token: never shown whole (`shown`)

    def shown(self, value: Any) -> str:
        """The value as ``crawlfleet settings`` may print it: a secret is only said to be set (a URL keeps its
        scheme, host and path, :func:`redact_url`)."""
        text = str(value)
        if not self.secret or not text:
            return text
        return redact_url(text) if "://" in text else "(set, hidden)"

    @property
    def attribute(self) -> str:
        """Its attribute on :class:`Settings`: ``CRAWLFLEET_REDIS_URL`` -> ``redis_url``."""
        return self.name[len(PREFIX):].lower()

    @property
    def type(self) -> type:
        """The type of its value: what ``parse`` makes of a string (``str`` unless int, float or a boolean)."""
        return _PARSED_TYPES.get(self.parse, str)


def redact_url(url: str) -> str:
    """A URL without what may be a credential: user information and the query become ``***``, the fragment goes.
    For logs and pages (a webhook URL often carries its token in the query)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))
    except ValueError:
        return "(an unreadable URL)"


SETTINGS: dict[str, Setting] = {}
_PARSED_TYPES: dict[Callable[[str], Any], type] = {int: int, float: float, parse_bool: bool}


PARTITION_MODES = ("host", "domain", "ip")  # messaging.domains.PARTITIONS (settings import nothing of it)


def parse_partition(value: str) -> str:
    """A queue partition (CRAWLFLEET_PARTITION): ``host``, ``domain`` or ``ip``, any case."""
    mode = value.strip().lower()
    if mode not in PARTITION_MODES:
        raise ValueError(f"{value!r} is not one of {', '.join(PARTITION_MODES)}")
    return mode


def define(
    name: str,
    default: Any,
    doc: str,
    *,
    group: str,
    parse: Callable[[str], Any] = str,
    state_key: str | None = None,
    secret: bool = False,
) -> Setting:
    """Declare a setting; every ``CRAWLFLEET_*`` variable that any component reads must be declared."""
    if not name.startswith(PREFIX):
        raise ValueError(f"setting names start with {PREFIX}: {name}")
    if name in SETTINGS:
        raise ValueError(f"setting declared twice: {name}")
    setting = Setting(name, default, doc, group, parse, state_key, secret)
    SETTINGS[name] = setting
    return setting


def default(name: str) -> Any:
    """The declared default of a setting (for dataclass defaults that must not drift from the registry)."""
    return SETTINGS[name].default


# --- local run ---------------------------------------------------------------------------------------------------
define("CRAWLFLEET_RUN_DIR", str(Path.home() / ".crawlfleet"),
       "Directory of the local run: state file, service data, logs.", group="local")
define("CRAWLFLEET_HOSTS_FILE", "",
       "Hosts file (``/etc/hosts`` format) mapping test host names such as ``*.fleet.test`` to loopback "
       "addresses; used by the Scrapy resolver, proxies and validators. Empty: system resolution only.",
       group="local", state_key="hosts_file")
define("CRAWLFLEET_NODE_NAME", "", "Name this host reports in API envelopes and registries (default: hostname).",
       group="local")
define("CRAWLFLEET_LOG_LEVEL", "INFO", "Log level of crawlfleet's long-running processes.", group="local")
define("CRAWLFLEET_DEMOWEB_ADDRESSES", "127.0.0.11",
       "First loopback address of the demo web: its sites take 16 consecutive addresses from it (a site per "
       "address; the changing site the 16th). A second demo web on one machine needs a range of its own, e.g. "
       "127.0.1.11.", group="local")

define("CRAWLFLEET_LOCAL_MONGO_CACHE", "",
       "WiredTiger cache of the MongoDB-wire server the local services start (SecantusDB ``--cache-size``: ``512M``, "
       "``2G``). Empty: sized from the machine's memory (its cgroup limit if lower) by "
       "``deploy.services.mongo.cache_size``: on disk a 32nd of it, within 256 MB and 1 GB (WiredTiger's cache: "
       "the server's RSS is larger, 1.4 GB at 60,000 items of ~5 KB with 753 MB); in memory, where the cache *is* "
       "the data and a full one refuses every write, an 8th, within 512 MB and 4 GB.", group="local")

# local run: the fleet's supervisor (deploy/supervisor.py, started by `crawlfleet up`)
define("CRAWLFLEET_SUPERVISE_INTERVAL", 5.0,
       "Seconds between two checks of the local fleet's supervisor (services through a write, processes, fenced "
       "workers).", group="local", parse=float)
define("CRAWLFLEET_SUPERVISE_BOUND", 20.0,
       "Seconds a service may stay unhealthy before the supervisor restarts it in place (same port, same data).",
       group="local", parse=float)
define("CRAWLFLEET_SUPERVISE_BACKOFF", 5.0,
       "Seconds the supervisor waits before restarting the same service or process again; doubles with each "
       "restart in a row.", group="local", parse=float)
define("CRAWLFLEET_SUPERVISE_BACKOFF_MAX", 120.0,
       "The longest wait between two restarts of the same service or process.", group="local", parse=float)
define("CRAWLFLEET_SUPERVISOR_HEARTBEAT_TTL", 10.0,
       "Seconds without a heartbeat (<run dir>/supervisor.beat, written every second) after which the fleet's masters "
       "take its supervisor for hung, kill it and start another; a supervisor whose process is gone is started "
       "again at once.", group="local", parse=float)

# --- redis -------------------------------------------------------------------------------------------------------
define("CRAWLFLEET_REDIS_URL", "redis://127.0.0.1:6379/0",
       "Redis URL (``redis://`` or ``rediss://`` for TLS; user:password@ for ACL credentials). With "
       "CRAWLFLEET_REDIS_CLUSTER, any node of the cluster.", group="redis", state_key="redis_url")
define("CRAWLFLEET_REDIS_CLUSTER", False, "Talk to a Redis Cluster (redis-py RedisCluster) instead of one server.",
       group="redis", parse=parse_bool, state_key="redis_cluster")

# --- kafka -------------------------------------------------------------------------------------------------------
define("CRAWLFLEET_KAFKA_BOOTSTRAP", "127.0.0.1:9092", "Kafka bootstrap servers, comma-separated host:port.",
       group="kafka", state_key="kafka_bootstrap")
define("CRAWLFLEET_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT",
       "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SASL_MECHANISM", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL protocol).",
       group="kafka")
define("CRAWLFLEET_KAFKA_SASL_USERNAME", "", "SASL user name.", group="kafka")
define("CRAWLFLEET_KAFKA_SASL_PASSWORD", "", "SASL password.", group="kafka", secret=True)
define("CRAWLFLEET_KAFKA_SSL_CAFILE", "", "CA bundle for SSL/SASL_SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SSL_CERTFILE", "", "Client certificate for SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SSL_KEYFILE", "", "Client key for SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS", 10000, "Consumer-group session timeout.", group="kafka", parse=int)
define("CRAWLFLEET_KAFKA_HEARTBEAT_MS", 1000, "Consumer-group heartbeat interval.", group="kafka", parse=int)
define("CRAWLFLEET_KAFKA_IDEMPOTENCE", True,
       "Idempotent producing (acks=all): the broker drops a batch the producer retries after a timeout when it kept "
       "the first one. kafka-python turns it off by itself (and logs it) for a broker older than 0.11; turn it off "
       "for a broker that claims support and fails it.", group="kafka", parse=parse_bool)
define("CRAWLFLEET_KAFKA_DELIVERY_TIMEOUT", 120.0,
       "Seconds the producer keeps retrying a record (idempotently) before it gives up; after that the record is "
       "sent again only if a read of its partition does not find it (messaging.delivery).", group="kafka",
       parse=float)
define("CRAWLFLEET_TOPIC_INCOMING", "crawlfleet.incoming", "Topic of incoming requests.", group="kafka")
define("CRAWLFLEET_TOPIC_OUTBOUND", "crawlfleet.outbound", "Topic of answers and events.", group="kafka")
define("CRAWLFLEET_TOPIC_FAILED", "crawlfleet.failed", "Topic of rejected requests, with the reason.",
       group="kafka")

# --- zookeeper ---------------------------------------------------------------------------------------------------
define("CRAWLFLEET_ZK_HOSTS", "127.0.0.1:2181",
       "ZooKeeper connection string, host:port[,host:port][/chroot].", group="zookeeper", state_key="zk_hosts")
define("CRAWLFLEET_ZK_TIMEOUT", 5.0,
       "ZooKeeper session timeout in seconds (short: a lost master is replaced fast).", group="zookeeper",
       parse=float)
define("CRAWLFLEET_ZK_ROOT", "/crawlfleet", "Root znode of crawlfleet's tree.", group="zookeeper")

# zookeeper recovery (issue 29): how soon a client notices that ZooKeeper is back
define("CRAWLFLEET_ZK_RECONNECT_MAX_DELAY", 1.0,
       "Longest pause in seconds between two connection attempts while ZooKeeper is away (kazoo's default grows "
       "to an hour, so sessions resumed 20 s after a 20 s outage); with its jitter a client is back within about "
       "1.5 s of ZooKeeper's return.", group="zookeeper", parse=float)

# --- mongodb -----------------------------------------------------------------------------------------------------
define("CRAWLFLEET_MONGO_URI", "mongodb://127.0.0.1:27017/",
       "MongoDB URI (credentials and TLS as URI options).", group="mongodb", state_key="mongo_uri")
define("CRAWLFLEET_MONGO_DB", "crawlfleet", "Database that holds the items (one collection per crawl).",
       group="mongodb")

# --- worker identity ---------------------------------------------------------------------------------------------
define("CRAWLFLEET_WORKER_IP", "",
       "Host IP identity: this host's address as crawled sites see it without a proxy (per-IP throttles). "
       "Default: the address of the interface that routes outwards.", group="worker")
define("CRAWLFLEET_JOB", "",
       "A worker's job id: its name in the registry and the prefix of its queues, never reused (``crawlfleet "
       "worker --job``, the manager's job id, or ``-s CRAWLFLEET_JOB=…``). Default: "
       "``<host>-<spider type>-<pid>-<random>``.", group="worker")
define("CRAWLFLEET_PROJECT", "",
       "The Scrapy project a worker of one's own spider belongs to: its spider type is ``<project>.<spider>``. "
       "Empty: the deployed project's name (``python -m spiders.runner --project`` sets it), else the project's "
       "BOT_NAME.", group="worker")
define("CRAWLFLEET_CRAWL", "",
       "The crawl a worker of one's own spider serves (its crawl id; the manager sets it to the job id of "
       "``schedule.json``). Empty: the running crawl of the worker's spider type, begun by the first worker when "
       "none runs (``scrapy crawl`` with the fleet's add-on, as scrapy-redis's workers share a spider's queue).",
       group="worker")
define("CRAWLFLEET_REQUEST_MAX_BYTES", 65536,
       "Largest request a spider of one's own may yield, in bytes once it is a task (URL, headers, body, cookies, "
       "meta, cb_kwargs): a larger one cannot travel through Redis and is refused where it is yielded, logged and "
       "counted in its crawl's failures (``untravelable: size``).", group="worker", parse=int)
define("CRAWLFLEET_ITEM_STORE", True,
       "Store the items of one's own spiders in MongoDB (one collection per crawl) after the project's own "
       "pipelines, so that exports, the crawl page and crawl_finished count them. Off: the project's pipelines "
       "only.", group="worker", parse=parse_bool)

# --- metrics -----------------------------------------------------------------------------------------------------
define("CRAWLFLEET_METRICS_PORT", 0,
       "Base port of the Prometheus /metrics endpoints; each process on a host takes the next free port from "
       "it. 0: an ephemeral port, registered in Redis.", group="metrics", parse=int)
define("CRAWLFLEET_METRICS_HOST", "127.0.0.1", "Address the /metrics endpoints listen on.", group="metrics")
define("CRAWLFLEET_PROMETHEUS_SD_FILE", "",
       "Prometheus file_sd file of every live /metrics endpoint of the cluster (from Redis: the processes' endpoints "
       "and the managers'), rewritten atomically by `crawlfleet up` (its supervisor keeps it current) and by every "
       "manager. Empty: <run dir>/prometheus/targets.json; `off`: not written.", group="metrics")
define("CRAWLFLEET_PROMETHEUS_SD_INTERVAL", 10.0,
       "Seconds between two rewrites of CRAWLFLEET_PROMETHEUS_SD_FILE by a manager (the supervisor rewrites it at "
       "each of its checks).", group="metrics", parse=float)
define("CRAWLFLEET_LIVENESS_SECONDS", 60.0,
       "Seconds a loop that does a process's work (a service's main loop, a worker's reactor, feed thread or "
       "heartbeat) may go without a turn before the process's /livez fails (messaging/health.py). A turn that failed "
       "because a store is away still counts, so an outage fails /readyz only; keep it above the Redis socket timeout "
       "(30 s), which bounds a call to a hung server.", group="metrics", parse=float)

# --- metrics: each process's own port ----------------------------------------------------------------------------
for _module, _what in (("MASTER", "a master"), ("CRAWLER", "a Scrapy worker"), ("KAFKA_MONITOR", "a Kafka monitor"),
                       ("REDIS_MONITOR", "a Redis monitor")):
    define(f"CRAWLFLEET_{_module}_METRICS_PORT", -1,
           f"Port of {_what}'s /metrics: -1 takes CRAWLFLEET_METRICS_PORT; 0 an ephemeral port (announced in the "
           "log and in Redis, so that several processes on one host never collide); P > 0 the first free port from P."
           " The manager serves /metrics on its own port (CRAWLFLEET_MANAGER_PORT).", group="metrics", parse=int)

# --- politeness --------------------------------------------------------------------------------------------------
define("CRAWLFLEET_LEASE_SECONDS", 600.0,
       "Lease of a popped task (seconds, Redis clock): at least download timeout x (retries + 1), or renewed while "
       "the task is processed; an expired lease returns the task to its domain queue.", group="politeness",
       parse=float)
define("CRAWLFLEET_ROBOTSTXT_OBEY", True,
       "Refuse URLs that the site's robots.txt disallows (as Scrapy's ROBOTSTXT_OBEY) and slow down to its "
       "Crawl-delay.", group="politeness", parse=parse_bool)
define("CRAWLFLEET_ROBOTSTXT_USER_AGENT", "crawlfleet",
       "The crawler's product token (RFC 9309 2.2.1: letters, '_' and '-', optionally /version) that robots.txt "
       "groups, X-Robots-Tag prefixes and <meta name=...> robots tags are matched for, case-insensitively; never "
       "the rotating User-Agent header. A worker refuses to start with anything else.", group="politeness")
define("CRAWLFLEET_PARTITION", "domain",
       "How the fleet groups a crawl's URLs into queues, and so paces them, unless the crawl's rule says "
       "(\"partition\"): domain (one queue and one pace per registered domain: a.blogspot.com and b.blogspot.com "
       "share them), host (per host name), or ip (per address the host resolves to, resolved by the master at "
       "dispatch). Like StormCrawler's partition.url.mode: byDomain, byHost, byIP.", group="politeness",
       parse=parse_partition)
define("CRAWLFLEET_ROBOTS_TTL", 86400.0,
       "Seconds a fetched robots.txt stays in the cluster-wide cache (robots:{<domain>}).", group="politeness",
       parse=float)
define("CRAWLFLEET_ROBOTS_ERROR_TTL", 600.0,
       "Longest wait in seconds before an unreachable robots.txt (5xx, 429, network error) is fetched again; the "
       "first retry comes after 15 s (or the server's Retry-After) and the wait doubles. Meanwhile nothing of the "
       "host is fetched (RFC 9309 2.3.1.3): its tasks wait in their queues.", group="politeness", parse=float)

# --- robots.txt: claims and outages (RFC 9309) --------------------------------------------------------------------
define("CRAWLFLEET_ROBOTS_LOCK_SECONDS", 30.0,
       "TTL in seconds of a worker's claim on a host's robots.txt fetch (one fetch for the cluster); the holder "
       "renews it every third of this while the download runs, so a dead holder's claim ends after this long.",
       group="politeness", parse=float)
define("CRAWLFLEET_ROBOTS_OUTAGE_LIMIT", 86400.0,
       "Seconds a host's robots.txt may stay unreachable before it is treated as unavailable (allow all) until it "
       "answers again: RFC 9309 2.3.1.3's escape after \"a reasonably long period of time\".", group="politeness",
       parse=float)


# --- politeness: paced hits and adaptive delay (frontier/politeness.py, frontier/adaptive.py) ------------------
define("CRAWLFLEET_PACE_HORIZON", 1.0,
       "How far ahead (seconds) a politeness step may reserve a site's next hit: a worker takes a task only when "
       "its hit is due within this time, and sends it at that moment. Longer smooths a busy worker's timing; "
       "shorter makes a lowered rate apply sooner.", group="politeness", parse=float)
define("CRAWLFLEET_PACE_SLACK", 0.1,
       "Least time (seconds) a request may take from its reserved slot to the site (a fifth of the site's spacing "
       "when that is more): the worker hands it to the downloader within the slack less its way out (0.1 s, at "
       "most half the slack: a loaded host's process may wait tens of milliseconds for the CPU), and one that would "
       "be handed out later takes a new slot. Windows are checked this much wider, so the site never sees more "
       "than its rate in any window.", group="politeness", parse=float)
define("CRAWLFLEET_PACE_SLACK_SHARE", 0.01,
       "Least time a request may wait for the downloader after its slot, as a share of the site's window (0.01: "
       "0.6 s for a 60-s window); its slack is that plus its way out to the site (0.1 s), when that is more than "
       "CRAWLFLEET_PACE_SLACK and a fifth of the spacing: a busy worker's leases wait 0.1-0.3 s for the downloader, "
       "and a shorter slack makes them miss their slot and reserve another (a Redis call and a delay each). It costs "
       "a site at most this share of its rate and 0.1 s of its window (windows are checked that much wider); 0 "
       "turns it off.",
       group="politeness", parse=float)
define("CRAWLFLEET_ADAPTIVE_TARGET_CONCURRENCY", 1.0,
       "Adaptive sites (site config \"adaptive\": true): requests the site should be serving at once for the whole "
       "cluster; its delay follows its response time divided by this (Scrapy's AUTOTHROTTLE_TARGET_CONCURRENCY, "
       "but cluster-wide).", group="politeness", parse=float)
define("CRAWLFLEET_ADAPTIVE_MAX_DELAY", 60.0,
       "Longest spacing (seconds) an adaptive site's response times and errors may slow it down to "
       "(AUTOTHROTTLE_MAX_DELAY).", group="politeness", parse=float)

# --- messaging: Kafka intake and Redis monitor ----------------------------------------------------------------------
define("CRAWLFLEET_MAX_MESSAGE_BYTES", 512 * 1024,
       "Largest request accepted on the incoming topic, in bytes (larger ones go to the failed topic). Keep it "
       "below the producer's max_request_size (kafka-python: 1 MiB) and the broker's message.max.bytes "
       "(Apache Kafka: about 1 MiB by default), which refuse larger records before crawlfleet sees them.",
       group="messaging", parse=int)
define("CRAWLFLEET_INCOMING_PARTITIONS", 4,
       "Partitions of the incoming, outbound and failed topics when the Kafka monitor creates them (at least 4 "
       "for the incoming topic; existing topics are left as they are).", group="messaging", parse=int)
define("CRAWLFLEET_KAFKA_GROUP", "crawlfleet-kafka-monitor", "Consumer group of the Kafka monitors.",
       group="messaging")
define("CRAWLFLEET_KAFKA_MONITOR_PLUGINS", request_kinds.kafka_plugins(),
       "The Kafka monitor's plugin chain: dotted paths of plugin classes, comma-separated, in order (default: the "
       "plugin of every request kind of ``messaging.request_kinds``). A request passes through every plugin that "
       "handles its kind; the plugins of the kinds CRAWLFLEET_REQUEST_KINDS adds follow.", group="messaging")
define("CRAWLFLEET_KAFKA_MONITOR_BATCH", 2000,
       "Records one poll of the Kafka monitor takes at most (validated, written to Redis in one pipeline, then "
       "committed).", group="messaging", parse=int)
define("CRAWLFLEET_SEEDS_HIGH_WATER", 1_000_000,
       "Back-pressure: the Kafka monitor pauses consuming while ``seeds`` holds more tasks than this.",
       group="messaging", parse=int)
define("CRAWLFLEET_SEEDS_LOW_WATER", 800_000,
       "Back-pressure: a paused Kafka monitor resumes once ``seeds`` holds fewer tasks than this.",
       group="messaging", parse=int)
define("CRAWLFLEET_INTAKE_DEDUP_TTL", 3600,
       "Seconds a crawl request's content hash is remembered, so that a redelivered request is not enqueued "
       "twice. The very same request resubmitted within this time is treated as a duplicate too.",
       group="messaging", parse=int)
define("CRAWLFLEET_CRAWL_TTL", 7 * 86400,
       "Seconds a crawl's keys (``crawl:<id>``) are kept after the crawl stopped or finished.",
       group="messaging", parse=int)
define("CRAWLFLEET_REQUEST_TTL", 86400,
       "Seconds an info, stats, site-config, stop, pause or resume request waits in Redis for a Redis monitor before "
       "it expires.",
       group="messaging", parse=int)
define("CRAWLFLEET_REDIS_MONITOR_PLUGINS", request_kinds.redis_plugins(),
       "The Redis monitor's plugins: dotted paths of plugin classes, comma-separated; each owns a kind of request "
       "(default: the answering plugin of every request kind of ``messaging.request_kinds``; those of the kinds "
       "CRAWLFLEET_REQUEST_KINDS adds follow).", group="messaging")
define("CRAWLFLEET_REQUEST_KINDS", "",
       "Request kinds of your own, beside the built-in ones: dotted paths (``package.module:KIND``) of "
       "``messaging.request_kinds.RequestKind`` entries, comma-separated. The monitors and the command line "
       "recognise, validate, store, answer and ask them like the built-in kinds (docs/extending.md).",
       group="messaging")
define("CRAWLFLEET_REDIS_MONITOR_INTERVAL", 1.0,
       "Seconds a Redis monitor's blocking read of the request streams waits for a request before it looks again "
       "(at its stop flag and at requests left by a dead monitor); a request is answered as soon as it arrives.",
       group="messaging", parse=float)
define("CRAWLFLEET_MONITOR_LOCK_TTL", 120,
       "Seconds a request read by a Redis monitor may go without its renewal before another monitor takes it over "
       "(the monitor renews it every third of this while its plugin runs).", group="messaging", parse=int)
define("CRAWLFLEET_ANSWER_TIMEOUT", 30.0,
       "Seconds the CLI waits for an answer on the outbound topic.", group="messaging", parse=float)


# --- master: registry, dispatcher, election ---------------------------------------------------------------------
define("CRAWLFLEET_HEARTBEAT_TTL", 15.0,
       "Seconds without a heartbeat (Redis clock) after which the master declares a worker dead: its job id is "
       "retired (fenced) and its queues and leases go back to seeds.", group="master", parse=float)
define("CRAWLFLEET_HEARTBEAT_INTERVAL", 3.0,
       "Seconds between a worker's heartbeats (keep it well below CRAWLFLEET_HEARTBEAT_TTL).", group="master",
       parse=float)

# --- master: slow is not gone (issue 30) ---
define("CRAWLFLEET_WORKER_SLOW_AFTER", 10.0,
       "Seconds a worker's feed thread may go without a pass (walk, take, commit) before the registry shows it as "
       "slow. Its heartbeat runs on a thread of its own and carries that lag: a slow worker is logged and shown, "
       "never retired; only a worker without a heartbeat for CRAWLFLEET_HEARTBEAT_TTL is.", group="master",
       parse=float)
define("CRAWLFLEET_WEIGHT_WINDOW_MINUTES", 10,
       "k of seed formula 4-2: a worker's weight is its completions per busy minute over the last k minutes; also "
       "the dispatcher's window (seed is_max).", group="master", parse=int)
define("CRAWLFLEET_DISPATCH_HEADROOM", 1.2,
       "Per window the dispatcher hands a spider type's workers at most headroom x their measured capacity, and "
       "keeps each worker's queues at most headroom x its rate x CRAWLFLEET_DISPATCH_BACKLOG_MINUTES deep.",
       group="master", parse=float)
define("CRAWLFLEET_DISPATCH_BACKLOG_MINUTES", 2.0,
       "Minutes of work (at the worker's measured rate) its queues may hold; less is lost time after a "
       "slow-down or a death, more is slack against dispatch pauses.", group="master", parse=float)
define("CRAWLFLEET_DISPATCH_SITE_MINUTES", 2.0,
       "Minutes of a site's own hits (its rate from ZooKeeper) that the workers' queues may hold, all workers "
       "together; its other tasks wait in seeds, so that a paced site never fills the workers' backlogs. A worker "
       "whose domains all wait for their sites' next slots (nothing due) is given work whatever it holds.",
       group="master", parse=float)
define("CRAWLFLEET_DISPATCH_INITIAL_RATE", 60.0,
       "Tasks per minute assumed for a worker when no worker of its spider type has history yet (a new worker "
       "otherwise starts at the mean of the others).", group="master", parse=float)
define("CRAWLFLEET_DISPATCH_BATCH", 1000, "Most tasks moved from seeds to worker queues in one dispatch step.",
       group="master", parse=int)
define("CRAWLFLEET_DISPATCH_SCAN", 20000,
       "Most seeds entries looked at per dispatch round when searching for tasks of spider types that have "
       "workers with room (tasks of other types wait without blocking them).", group="master", parse=int)
define("CRAWLFLEET_DISPATCH_INTERVAL", 0.2,
       "Seconds the dispatcher waits when a round moved nothing (no tasks, no room). Every link a page leads to waits "
       "up to this long in seeds, so a chain of pages (pagination) is crawled at most one page per interval.",
       group="master", parse=float)
define("CRAWLFLEET_FINISH_INTERVAL", 2.0,
       "Seconds between the master's checks of crawls that may be finished.", group="master", parse=float)

# --- master: revisits (continuous crawling; master/revisits.py, frontier/revisit.py) -------------------------------
define("CRAWLFLEET_REVISIT_INTERVAL", 0.5,
       "Seconds between the leading master's looks at the revisit schedules (due URLs back to seeds as revisit "
       "tasks; schedules of stopped crawls, or past their until time, purged). A revisit is up to this late.",
       group="master", parse=float)
define("CRAWLFLEET_REVISIT_BATCH", 1000, "Most due URLs of one crawl moved back to seeds per look.",
       group="master", parse=int)

# --- master: schedules (issue 42; messaging/schedules.py, master/schedules.py) ------------------------------------
define("CRAWLFLEET_SCHEDULE_INTERVAL", 1.0,
       "Seconds between the leading master's looks at the schedules (``crawlfleet schedule``): a firing is up to "
       "this late.", group="master", parse=float)
define("CRAWLFLEET_SCHEDULE_GRACE", 3600.0,
       "Seconds a schedule's due time may be missed (no master led then) and still fire, late, once; a due time "
       "older than this when a leader looks is skipped, logged and counted as missed on the schedule.",
       group="master", parse=float)
define("CRAWLFLEET_SCHEDULE_HISTORY", 50,
       "Firings (and skipped due times) kept per schedule for ``crawlfleet schedule show`` and the Schedules page.",
       group="master", parse=int)

# --- alerts: webhooks per crawl event (issue 42; messaging/notify.py, master/notifier.py) --------------------------
define("CRAWLFLEET_NOTIFY_URL", "",
       "Fleet-wide default receiver of crawl events (a JSON POST per event) for crawls whose request has no "
       "``notify``. Empty: only crawls that ask are notified. Shown redacted (its query may hold a token).",
       group="alerts", secret=True)
define("CRAWLFLEET_NOTIFY_ON", "finished,failed,stalled,empty",
       "Events the fleet-wide default receiver gets, comma-separated: ``finished``, ``failed`` (the start URL "
       "failed, or every task was dead-lettered), ``stalled`` (no progress for CRAWLFLEET_STALL_AFTER), ``empty`` "
       "(finished without items).", group="alerts")
define("CRAWLFLEET_NOTIFY_SECRET", "",
       "Key of the notifications' signature: header ``X-Crawlfleet-Signature: sha256=<hex>``, the HMAC-SHA256 of "
       "the body (which holds the attempt's ``timestamp``, also sent as ``X-Crawlfleet-Timestamp``). Empty: "
       "unsigned (logged once). Never logged or shown.", group="alerts", secret=True)
define("CRAWLFLEET_NOTIFY_TIMEOUT", 10.0,
       "Seconds one delivery attempt may take (connect and answer); a slower receiver counts as failed and is "
       "tried again later.", group="alerts", parse=float)
define("CRAWLFLEET_NOTIFY_ATTEMPTS", 12,
       "Attempts per notification before it is given up (logged); a 4xx answer other than 408, 425 and 429 gives "
       "up at once (the receiver refused it).", group="alerts", parse=int)
define("CRAWLFLEET_NOTIFY_BACKOFF", 2.0,
       "Seconds before the second attempt of a notification; each further wait doubles (a Retry-After answer "
       "may ask for longer), up to CRAWLFLEET_NOTIFY_BACKOFF_MAX.", group="alerts", parse=float)
define("CRAWLFLEET_NOTIFY_BACKOFF_MAX", 600.0, "Longest wait in seconds between two attempts of a notification.",
       group="alerts", parse=float)
define("CRAWLFLEET_NOTIFY_INTERVAL", 1.0,
       "Seconds between the leading master's notifier passes (stall checks, due deliveries), on a thread of its "
       "own: a slow receiver never holds back dispatch, heartbeats or the finisher.", group="alerts", parse=float)
define("CRAWLFLEET_STALL_AFTER", 1800.0,
       "Seconds a running crawl with work left may go without progress (its pages, failures and re-processings "
       "counted) before its ``stalled`` event; one event per stall.", group="alerts", parse=float)
define("CRAWLFLEET_STALL_SHOW_AFTER", 60.0,
       "Seconds a running crawl with work left may go without progress before the info answer (``stalled``), "
       "``crawlfleet info``, the crawl page, ``crawlfleet fleet status`` and the metric "
       "``crawlfleet_crawl_stalled_seconds`` say it is stalled, and why (``messaging.stalls``); an item store that "
       "refuses writes is said after a few seconds. Progress is tracked by the leading master's stall watch.",
       group="alerts", parse=float)

# --- failures: failed URLs and their retry (issue 42; messaging/failures.py, messaging/counts.py) ----------------
define("CRAWLFLEET_FAILURES_MAX", 100_000,
       "Failed pages kept per crawl in its failures list (MongoDB ``<crawlid>.failures``: URL, reason, status, "
       "attempts, time), which ``crawlfleet failures`` shows and ``crawlfleet retry`` re-submits. Failures beyond "
       "it are still counted by reason, and as ``unlisted``.", group="failures", parse=int)

# --- dedup: Bloom filter (frontier/bloom, spiders/dupefilter.py) ---------------------------------------------------
define("CRAWLFLEET_BLOOM_NAMESPACE", "crawl",
       "Dedup scope: ``crawl`` (one filter per crawl id, expiring with the crawl; requests without a crawl id "
       "use the global one) or ``global`` (one filter for every crawl).", group="dedup")
define("CRAWLFLEET_BLOOM_CAPACITY", 10_000_000,
       "URLs the global filter is sized for before it grows (a new layer at tightened rate).", group="dedup",
       parse=int)
define("CRAWLFLEET_BLOOM_CRAWL_CAPACITY", 100_000,
       "URLs a per-crawl filter is sized for at first; it grows by layers as the crawl goes.", group="dedup",
       parse=int)
define("CRAWLFLEET_BLOOM_ERROR_RATE", 0.0001,
       "Target false-positive rate within capacity (a grown filter stays below rate / (1 - tightening)).",
       group="dedup", parse=float)
define("CRAWLFLEET_BLOOM_GROUPS", 2, "Hash groups (seed 4.2.3.2), each with its own bit array.", group="dedup",
       parse=int)
define("CRAWLFLEET_BLOOM_SHARDS", 16,
       "Most shards per filter: hash-tagged key sets that a Redis Cluster spreads over its nodes. A filter takes "
       "one per 2^20 URLs of its capacity, up to this many (a shard's headroom for an uneven spread costs "
       "4 sqrt((1 - 1/S) / c) of memory, 0.4% at 2^20; a smaller shard gains nothing from a cluster). A batch "
       "costs one BITFIELD per shard and part it touches, all in one round trip per node.", group="dedup",
       parse=int)
define("CRAWLFLEET_BLOOM_COUNTING", False,
       "Counting filter (4-bit counters, 4x the memory) so that URLs can be removed.", group="dedup",
       parse=parse_bool)
define("CRAWLFLEET_BLOOM_GROWTH", 2, "Capacity factor of each new layer.", group="dedup", parse=int)
define("CRAWLFLEET_BLOOM_TIGHTENING", 0.5, "Error-rate factor of each new layer.", group="dedup", parse=float)
define("CRAWLFLEET_BLOOM_MEMORY_SLACK", 0.03,
       "Memory the filter may spend above the fewest bits to use fewer hash functions (each one is a Redis "
       "operation per URL): 0.03 gives 5 instead of 7 hashes per group at 0.0001 (29% fewer operations for "
       "+2.8% memory); 0.005 gives 6 (+0.25%); 0 the fewest bits.", group="dedup", parse=float)
define("CRAWLFLEET_BLOOM_CRAWL_TTL", 7 * 86400,
       "Seconds a per-crawl filter lives after its last use (slid forward while the crawl runs); when the master "
       "declares the crawl finished, the filter gets CRAWLFLEET_CRAWL_TTL instead.", group="dedup", parse=float)

# --- worker: the Scrapy process (spiders/worker, spiders/pipelines, spiders/middlewares) -----------------------
define("CRAWLFLEET_PREFETCH", 32,
       "Tasks a worker keeps leased ahead of its downloader (taken through the politeness step by a background "
       "thread, so the reactor never waits on Redis). Twice CONCURRENT_REQUESTS keeps the downloader busy.",
       group="worker", parse=int)
define("CRAWLFLEET_COMMIT_INTERVAL", 0.1,
       "Seconds a worker gathers finished tasks before committing them in one batch (children to seeds, then the "
       "leases acknowledged and counted). A page's links reach seeds this much later: longer is fewer round trips, "
       "shorter a faster walk down chains of pages.", group="worker", parse=float)
define("CRAWLFLEET_IDLE_BACKOFF_MAX", 0.25,
       "Longest pause (seconds) between two looks at an idle worker's queues; the pause doubles from 50 ms while "
       "nothing is found.", group="worker", parse=float)
define("CRAWLFLEET_CRAWL_REFRESH", 2.0,
       "Seconds a worker trusts its copy of a crawl's state (running or stopped) and limits before reading "
       "``crawl:<id>`` again.", group="worker", parse=float)
define("CRAWLFLEET_RETRY_AFTER_DEFAULT", 60.0,
       "Seconds a domain is blocked cluster-wide after a 429 or 503 without a Retry-After header.", group="worker",
       parse=float)
define("CRAWLFLEET_RETRY_AFTER_MAX", 600.0,
       "Longest block (seconds) a Retry-After header may ask for; longer values are cut to this.", group="worker",
       parse=float)
define("CRAWLFLEET_RETRY_AFTER_TIMES", 3,
       "How often one task is retried after a 429 or 503 before its response is processed as it is.",
       group="worker", parse=int)
define("CRAWLFLEET_MONGO_BATCH", 200, "Items written to MongoDB in one bulk call (flushed when this many wait).",
       group="worker", parse=int)
define("CRAWLFLEET_MONGO_FLUSH_SECONDS", 0.1,
       "Longest time (seconds) an item waits in the buffer before a flush. A task completes, and its page's links "
       "reach seeds, only once its item is stored, so every step down a chain of links waits up to this long (at 1 s "
       "a broad crawl took 7 s to reach full speed from one start page, at 0.1 s 2.5 s); shorter is more writes.",
       group="worker", parse=float)
define("CRAWLFLEET_MONGO_BUFFER", 2000,
       "Items a worker holds while MongoDB is slow or unreachable; when full the worker stops taking tasks "
       "(back-pressure) and renews its leases until the items are written.", group="worker", parse=int)
define("CRAWLFLEET_MONGO_HISTORY", False,
       "Revisits: before a changed page's document is updated, copy its previous version into the collection "
       "``<crawlid>.history`` (one document per URL and version).", group="worker", parse=parse_bool)

# --- the ready index (frontier/client/ready.py) -------------------------------------------------------------------
define("CRAWLFLEET_READY_RECONCILE", 60.0,
       "Seconds of one full pass of a worker's ready-index repair (a slice of ``<job>:domains`` each second): a "
       "domain with queued tasks whose index entry was lost (a crash between two writes) is walked again within "
       "this time.", group="worker", parse=float)

# --- render: pages that need a browser (spiders/render) -----------------------------------------------------------
define("CRAWLFLEET_RENDER_BROWSER", "",
       "Chromium binary the worker renders with (Playwright's ``executable_path``); empty: Debian's "
       "``chromium-headless-shell``, else ``chromium`` (deploy/install-deps.sh installs both; no browser is "
       "downloaded).", group="render")
define("CRAWLFLEET_RENDER_PAGES", 4,
       "Pages a worker renders at once (its page pool); a render waits for a free page, its task stays leased.",
       group="render", parse=int)
define("CRAWLFLEET_RENDER_CONTEXT_PAGES", 100,
       "Pages rendered in one browser context before it is closed and a fresh one opened (cookies, cache and the "
       "renderer's memory go with it).", group="render", parse=int)
define("CRAWLFLEET_RENDER_TIMEOUT", 30.0,
       "Seconds one render may take in all (navigation, scripts, settling, reading the DOM); past it the page is "
       "closed and the download fails with a timeout (retried as Scrapy retries timeouts, then the task completes "
       "with that reason).", group="render", parse=float)
define("CRAWLFLEET_RENDER_SETTLE", 2.0,
       "Seconds a rendered page may take after its load event to go quiet on the network (scripts fetching their "
       "content); the DOM is read then, or at this limit on a page that never goes quiet.", group="render",
       parse=float)
define("CRAWLFLEET_RENDER_BLOCK", "image,font,media",
       "Resource types a rendering browser never fetches (Playwright's resource types, comma-separated).",
       group="render")
define("CRAWLFLEET_RENDER_SUBREQUESTS", 50,
       "Most requests one rendered page may send to its own host besides the page itself (scripts, JSON, styles); "
       "further ones are aborted, so a page cannot flood the site it is on.", group="render", parse=int)
define("CRAWLFLEET_RENDER_LEARN_PAGES", 20,
       "``render: auto``: pages of a site a worker judges before it trusts what it learned: when the last this many "
       "all needed the browser the site is rendered straight away, when none of them did its pages are no longer "
       "rendered on a guess.", group="render", parse=int)
define("CRAWLFLEET_RENDER_RECHECK", 25,
       "``render: auto``: once a site is learned, one page in this many is still judged both ways, so a site that "
       "changes is learned again.", group="render", parse=int)
define("CRAWLFLEET_RENDER_MIN_TEXT", 200,
       "``render: auto``: characters of visible text below which a static content page counts as having no main "
       "text (rendered).", group="render", parse=int)

# --- worker: page work off the reactor (spiders/pipelines/pagework.py) -------------------------------------------
define("CRAWLFLEET_PAGE_PROCESSES", -1,
       "Processes a worker runs main-text extraction, Markdown and metadata in, off its reactor thread "
       "(spiders/pipelines/pagework.py; programs of their own, `python -m spiders.pipelines.pageproc`, that never "
       "import the worker's __main__; items' order is irrelevant and a busy pool holds back downloading; a "
       "process that dies loses no page). -1 (default): ceil(usable cores / CRAWLFLEET_HOST_WORKERS) - 1, at most "
       "4: one or more when the host has more than one usable core (os.sched_getaffinity) per worker, else none; "
       "0: none, the pipelines do the work in the reactor thread; N: N.",
       group="worker", parse=int)
define("CRAWLFLEET_MALLOC_TRIM_INTERVAL", 30.0,
       "Seconds between two calls of glibc's ``malloc_trim`` in every long-lived process of the fleet (worker, "
       "master, monitors, manager), which give the allocator's free pages back to the system: without it a "
       "process's resident memory grows with the pages it has handled (``messaging.memory``); with it, glibc's mmap "
       "threshold is fixed at 128 KiB (blocks from that size up returned when freed). 0: neither.",
       group="worker", parse=float)
define("CRAWLFLEET_PAGE_PROCESS_RECYCLE", 25000,
       "Pages a page-work process (CRAWLFLEET_PAGE_PROCESSES) is sent before a new one takes its place: the old one "
       "answers what it holds and ends, so no page is lost and no process grows with the crawl's length whatever "
       "a library it runs keeps (issue 40). 0: never.", group="worker", parse=int)
define("CRAWLFLEET_HOST_WORKERS", 1,
       "Worker processes this host runs, for CRAWLFLEET_PAGE_PROCESSES=-1 (usable cores per worker). `crawlfleet "
       "up` sets it for its workers to how many it runs, the manager for its spiders to CRAWLFLEET_MANAGER_MAX_PROC "
       "(unless it is set in their environment); a worker started on its own counts as the only one.",
       group="worker", parse=int)

# --- warc: WARC archives written by the workers (spiders/warc) ----------------------------------------------------
define("CRAWLFLEET_WARC_DIR", "",
       "Directory of the workers' WARC files: when set, every worker writes what it fetches there (request, "
       "response or revisit, and metadata records; gzip per record) with a CDXJ index beside each file. Empty: off.",
       group="warc")
define("CRAWLFLEET_WARC_MAX_SIZE", 1_000_000_000,
       "Bytes after which a worker's WARC file is closed (and indexed) and the next one begun; a file ends within "
       "one record of this.", group="warc", parse=int)
define("CRAWLFLEET_WARC_PREFIX", "crawlfleet",
       "First part of WARC file names: ``<prefix>-<timestamp>-<serial>-<job>.warc.gz``.", group="warc")
define("CRAWLFLEET_WARC_DEDUP_ENTRIES", 1_000_000,
       "Payload digests a worker remembers to write a duplicate as a ``revisit`` record (oldest forgotten first; "
       "about 150 bytes each).", group="warc", parse=int)

# --- manager: the scrapyd-compatible HTTP manager of a worker host (manager/) ----------------------------------
define("CRAWLFLEET_MANAGER_BIND", "127.0.0.1",
       "Address the manager listens on. Any address but loopback requires CRAWLFLEET_MANAGER_AUTH (the manager "
       "refuses to start without it).", group="manager")
define("CRAWLFLEET_MANAGER_PORT", 6800, "Port of the manager's API and pages (scrapyd's port).", group="manager",
       parse=int)
define("CRAWLFLEET_MANAGER_AUTH", "",
       "HTTP basic authentication of the manager, ``user:password`` (as scrapyd's username/password; scrapyd "
       "clients send it). Empty: none, allowed on a loopback bind only.", group="manager", secret=True)
define("CRAWLFLEET_MANAGER_URL", "",
       "URL other managers and their pages use to reach this one (default: http://<bind address>:<port>, the "
       "host name when bound to every address).", group="manager")
define("CRAWLFLEET_MANAGER_MAX_PROC", 0,
       "Spider processes the manager runs at once (scrapyd's max_proc); 0: 4 per CPU.", group="manager", parse=int)
define("CRAWLFLEET_MANAGER_FINISHED_TO_KEEP", 100, "Finished jobs kept in the manager's history.",
       group="manager", parse=int)
define("CRAWLFLEET_MANAGER_LOGS", "",
       "Directory of the spider processes' logs, ``<project>/<spider>/<job>.log`` (default: "
       "$CRAWLFLEET_RUN_DIR/manager/logs).", group="manager")
define("CRAWLFLEET_MANAGER_DBS", "",
       "Directory of the manager's SQLite databases: pending queue and job history, kept across restarts "
       "(default: $CRAWLFLEET_RUN_DIR/manager/dbs).", group="manager")
define("CRAWLFLEET_MANAGER_POLL_INTERVAL", 1.0, "Seconds between two looks at the pending queue.",
       group="manager", parse=float)
define("CRAWLFLEET_MANAGER_KILL_TIMEOUT", 30.0,
       "Seconds a cancelled spider has to finish (SIGTERM: commit, leave the registry, hand its tasks back) "
       "before it is killed (SIGKILL).", group="manager", parse=float)
define("CRAWLFLEET_MANAGER_PROJECT_DIR", "",
       "Working directory of the spider processes (the Scrapy project, with scrapy.cfg); default: the manager's.",
       group="manager")
define("CRAWLFLEET_MANAGER_MAX_BODY", 2 * 1024 * 1024,
       "Largest request body the manager reads, in bytes: a larger Content-Length is answered 413 before the body "
       "is read (a chunked body is cut off as it arrives). Covers a crawl request of CRAWLFLEET_MAX_MESSAGE_BYTES "
       "sent through the Submit page's form.", group="manager", parse=int)
define("CRAWLFLEET_MANAGER_MAX_UPLOAD", 64 * 1024 * 1024,
       "Largest body of scrapyd's egg upload (addversion.json), in bytes.", group="manager", parse=int)
define("CRAWLFLEET_MANAGER_HEADER_TIMEOUT", 10.0,
       "Seconds a request's line and headers have to arrive, from its first byte (or the connection's opening, or "
       "the previous response): a slow or idle connection is closed then (slowloris).", group="manager",
       parse=float)
define("CRAWLFLEET_MANAGER_BODY_TIMEOUT", 30.0,
       "Seconds a request's body has to arrive after its headers (408 after that).", group="manager", parse=float)
# the manager's heartbeat (was a constant of manager/config.py)
define("CRAWLFLEET_MANAGER_HEARTBEAT_INTERVAL", 5.0,
       "Seconds between the manager's heartbeats in the managers' registry (its entry expires after four).",
       group="manager", parse=float)
define("CRAWLFLEET_MANAGER_WORKERS", 2,
       "Workers a manager starts for a fleet crawl of a deployed project (``schedule.json``; its parameter "
       "``_workers`` overrides it), spread over the live managers of ``_hosts`` (default: this one).",
       group="manager", parse=int)
define("CRAWLFLEET_MANAGER_BUILTIN_PROJECT", True,
       "Serve the installed project ``crawlfleet`` (the fleet's rule spiders) beside the deployed ones, first in "
       "``listprojects.json``. Off: deployed projects only, as scrapyd with no project in its ``[settings]``.",
       group="manager", parse=parse_bool)

# --- projects: deployed Scrapy projects, their eggs (messaging/eggs.py, messaging/egg_cache.py, spiders/runner.py)
define("CRAWLFLEET_EGGS_COLLECTION", "_eggs",
       "GridFS bucket (in CRAWLFLEET_MONGO_DB) of the deployed projects' eggs, one per (project, version): "
       "``<name>.files`` and ``<name>.chunks``, and ``<name>.versions`` (one document per version: digest, size, "
       "upload time). Every host's manager and workers load eggs from there.", group="projects")
define("CRAWLFLEET_EGG_CACHE_DIR", "",
       "Directory of this host's egg cache: each version fetched once, checked by its SHA-256 (default: "
       "$CRAWLFLEET_RUN_DIR/eggs).", group="projects")
define("CRAWLFLEET_EGG_MAX_BYTES", 64 * 1024 * 1024,
       "Largest egg ``addversion.json`` accepts, in bytes.", group="projects", parse=int)
define("CRAWLFLEET_EGG_CHECK_TIMEOUT", 60.0,
       "Seconds the project's spider loader has to list its spiders (a child process, at ``addversion.json`` and "
       "``listspiders.json``) before it is killed and the egg refused.", group="projects", parse=float)

# --- proxy: the proxy pool (spiders/proxies, spiders/spiders/proxy.py, spiders/middlewares/proxy.py) -----------
define("CRAWLFLEET_PROXY_COLLECTION", "proxies",
       "MongoDB collection (in CRAWLFLEET_MONGO_DB) of the proxy pool: one document per proxy, ``_id`` ip:port.",
       group="proxy")
define("CRAWLFLEET_PROXY_LIST_URLS", "",
       "Proxy-list pages the collector (``crawlfleet proxies collect``, spider ``proxy``) reads, comma-separated.",
       group="proxy")
define("CRAWLFLEET_PROXY_LIST_RULE", "",
       "XPath rule of the proxy-list pages, JSON like a list rule's ``first_page_xpath``: ``list_from`` (one entry "
       "per proxy), ``next_page``, and the fields ``ip``, ``port``, ``location``, ``anonymity``, ``type``, "
       "``speed``, ``alive_time`` (``user``, ``password`` optional) relative to the entry; ``@path`` reads it from "
       "a file. Empty: a table of one proxy per row, in the columns of that order.", group="proxy")
define("CRAWLFLEET_PROXY_TEST_URL", "http://www.baidu.com/",
       "URL the validator fetches through each proxy (plain HTTP: a forward-proxy request).", group="proxy")
define("CRAWLFLEET_PROXY_TIMEOUT", 4.0,
       "Seconds a proxy has to answer the validator's request; slower counts as a failure (seed: 4 s).",
       group="proxy", parse=float)
define("CRAWLFLEET_PROXY_MAX_FAILURES", 3,
       "Consecutive failures (validator checks, or requests of a crawl) after which a proxy leaves the pool.",
       group="proxy", parse=int)
define("CRAWLFLEET_PROXY_CHECK_INTERVAL", 300.0,
       "Seconds between two checks of the whole pool by ``crawlfleet proxies serve``.", group="proxy", parse=float)
define("CRAWLFLEET_PROXY_CHECK_CONCURRENCY", 20, "Proxies the validator checks at once.", group="proxy", parse=int)
define("CRAWLFLEET_PROXY_SPIDER_TYPES", "",
       "Spider types whose requests go through the pool's live proxies, comma-separated (e.g. ``universal,list``); "
       "a request's ``meta['proxy_pool']`` (true/false) overrides it.", group="proxy")
define("CRAWLFLEET_PROXY_REFRESH", 5.0,
       "Seconds between two reads of the live proxies by a worker's background thread (its memory copy).",
       group="proxy", parse=float)
define("CRAWLFLEET_PROXY_RETRIES", 5,
       "Other proxies a request tries after its proxy failed (connection error, timeout, a ban status) before "
       "Scrapy's own retries take over.", group="proxy", parse=int)
define("CRAWLFLEET_PROXY_BAN_STATUSES", "403,407",
       "HTTP statuses that count as a failure of the proxy, comma-separated: the request is retried through "
       "another one.", group="proxy")
define("CRAWLFLEET_PROXY_COOLDOWN", 30.0,
       "Seconds a worker leaves out a proxy that just failed one of its requests (the pool counts the failure).",
       group="proxy", parse=float)
define("CRAWLFLEET_PROXY_API_BIND", "127.0.0.1", "Address of ``crawlfleet proxies serve`` (GET /proxy, /proxies).",
       group="proxy")
define("CRAWLFLEET_PROXY_API_PORT", 6801, "Port of ``crawlfleet proxies serve``.", group="proxy", parse=int)


class Settings(SettingsFields, Mapping[str, Any]):
    """Resolved settings, immutable: ``settings["CRAWLFLEET_REDIS_URL"]`` or ``settings.redis_url``.

    Every declared setting is an attribute, typed in :class:`messaging.settings_fields.SettingsFields` (generated
    from the registry by ``make readme``), so that a misspelt name or a wrong type fails ``make lint``.
    """

    _values: dict[str, Any]
    _sources: dict[str, str]

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_sources", dict(sources))
        for name, value in self._values.items():
            object.__setattr__(self, name[len(PREFIX):].lower(), value)

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only: {attr} (resolve new ones with messaging.settings.load)")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def source(self, name: str) -> str:
        """Where a value came from: ``env``, ``state`` or ``default``."""
        return self._sources[name]

    def as_env(self) -> dict[str, str]:
        """The settings as environment variables, e.g. for a child process."""
        return {name: _format(value) for name, value in self._values.items()}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def state_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "state.json"


def read_state(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The local run's state file, or ``{}`` when there is none (no local run, or a production host)."""
    path = state_path(run_dir)
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        return state
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"unreadable state file {path}: {exc}") from exc


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Resolve every declared setting from ``env`` (default: ``os.environ``), the state file and the defaults.

    Without ``env``, a process reads its settings once: the result is kept while the process's CRAWLFLEET_*
    variables, the state file and the registry stay what they were (a local run's ``crawlfleet up`` rewrites the
    state file; a test defines a setting), and resolved again when one of them changed.
    """
    if env is not None:
        return _resolve(env)
    variables = tuple(sorted((name, value) for name, value in os.environ.items() if name.startswith(PREFIX)))
    run_dir = os.environ.get("CRAWLFLEET_RUN_DIR") or SETTINGS["CRAWLFLEET_RUN_DIR"].default
    key = (variables, _state_version(run_dir), len(SETTINGS))
    cached = _loaded.get(key)
    if cached is None:
        _loaded.clear()
        cached = _loaded[key] = _resolve(os.environ)
    return cached


_loaded: dict[tuple[Any, ...], Settings] = {}


def _state_version(run_dir: str) -> tuple[int, int] | None:
    try:
        stat = state_path(run_dir).stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _resolve(env: Mapping[str, str]) -> Settings:
    run_dir = env.get("CRAWLFLEET_RUN_DIR") or SETTINGS["CRAWLFLEET_RUN_DIR"].default
    state = read_state(run_dir)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, setting in SETTINGS.items():
        if name in env:
            try:
                values[name] = setting.parse(env[name])
            except ValueError as exc:
                raise ValueError(f"{name}={env[name]!r}: {exc}") from exc
            sources[name] = "env"
        elif setting.state_key and setting.state_key in state:
            values[name] = state[setting.state_key]
            sources[name] = "state"
        else:
            values[name] = setting.default
            sources[name] = "default"
    values["CRAWLFLEET_RUN_DIR"] = run_dir
    return Settings(values, sources)

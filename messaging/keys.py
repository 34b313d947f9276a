"""Every Redis key crawlfleet uses, in one place (``docs/architecture.md``, "Redis keys": its table is made from here).

No other module formats a key string: components call these functions, so that the layout (and the Redis Cluster
hash tags) can be read and changed here alone. ``{…}`` marks a hash tag: every key of one domain lives in the same
cluster slot, so that one Lua call can touch a worker's queue, its leases and both throttle windows of a domain.
Seed names (``seeds``, ``stats:…``, ``info:…``) are kept where the seed gives them.
"""

from __future__ import annotations

from dataclasses import dataclass

from messaging.domains import InvalidDomain, host_problem

# --- global queue and crawls -------------------------------------------------------------------------------------
SEEDS = "seeds"
"""zset: the global task queue; score from priority and arrival order (lower pops first)."""

SEEDS_SEQUENCE = "seeds:{seeds}:sequence"
"""string: arrival counter, so that tasks of one priority pop first-in first-out (hash tag ``seeds``: the push
script increments it in the same call as it adds to ``seeds``, also on a Redis Cluster)."""

PENDING_SEEDS = "pending:{seeds}"
"""hash: crawlid -> tasks of the crawl in ``seeds`` or in a dispatcher staging area (same slot as ``seeds``)."""


def pending_domain(domain: str) -> str:
    """hash: crawlid -> tasks of the crawl in any job's queue, leases or requeue outbox of this domain."""
    return f"pending:{{{_tag(domain)}}}"


def crawl_domains(crawlid: str) -> str:
    """set: domains into which tasks of the crawl were dispatched (where its pending counts may live)."""
    return f"crawl:{crawlid}:domains"


def children_journal(digest: str) -> str:
    """hash: the children journal's entry of a task being committed (``digest``: of its member) — URL fingerprint ->
    child task, for each child the Bloom filter did not hold when the commit asked it, written before the commit
    marks them. Deleted by the call that pushes them into ``seeds`` (hash tag ``seeds``); one left behind means the
    commit stopped in between: the task's next commit pushes exactly these (``spiders.worker.journal``). Expires
    after a week."""
    return f"children:{{{SEEDS}}}:journal:{digest}"

FINISH_CANDIDATES = "finish:{seeds}:candidates"
"""set: crawls with nothing left in ``seeds``; the finisher checks their domains and declares them finished."""

# --- the finisher's change log (issue 30: a check costs O(what changed), not O(domains of a crawl)) ---
FINISH_TOUCHED = "finish:{seeds}:touched"
"""set: ``<domain> <crawlid>`` pairs whose ``pending:{<domain>}`` count changed since the finisher last looked: a
landing adds the pair atomically with the settle step that empties the crawl's ``seeds`` count; a completion, a drop
or a requeue adds it right after the count went down. The finisher re-reads only these counts."""

# --- importance ordering (issue 30, item 7): per crawl, in the slot of seeds ---
def importance_inlinks(crawlid: str) -> str:
    """hash: URL fingerprint -> distinct pages seen linking to it, for a crawl ordered by importance (rule field
    ``importance``); hash tag ``seeds``, so the script that counts also pushes and re-scores in ``seeds``."""
    return f"importance:{{{SEEDS}}}:{crawlid}:inlinks"


def importance_members(crawlid: str) -> str:
    """hash: URL fingerprint -> the task pushed for it, so a later link to the URL can raise its score in ``seeds``
    while it waits there."""
    return f"importance:{{{SEEDS}}}:{crawlid}:members"


CRAWLS = "crawls"
"""set: crawl ids that are known (running, stopped or finished, until their TTL)."""


def crawl(crawlid: str) -> str:
    """hash: the crawl's rule, spider type, user, limits, state and counts."""
    return f"crawl:{crawlid}"


# --- exact counts of a crawl (hash tag: the crawl) ---------------------------------------------------------------
def crawl_counted(crawlid: str) -> str:
    """hash: a page's canonical-URL fingerprint (hex) -> what it counts as now: its items, or ``<l|u|f>:<reason>``
    when it failed (``l``: kept in the crawl's failures list, ``u``: beyond the list's bound, ``f``: not a failure to
    list, e.g. robots.txt), with ``#<n>`` when retry ``n`` processed it last. Changed with ``crawl_totals`` in one
    script (``spiders/worker/lua/count.lua``)."""
    return f"crawl:{{{crawlid}}}:counted"


def crawl_totals(crawlid: str) -> str:
    """hash: the crawl's exact counts: ``pages`` and ``items`` once per canonical URL, ``restored`` (pages processed
    again after a fault), ``retried`` (processings by ``crawlfleet retry``), ``failed:<reason>`` (pages failing now,
    by reason), ``listed``/``unlisted`` (failing pages kept in the failures list / beyond its bound), ``start`` (why
    the start URL failed). ``pages`` and ``items`` of ``crawl:<crawlid>`` mirror them (``messaging.counts``)."""
    return f"crawl:{{{crawlid}}}:totals"


# --- crawls of one's own Scrapy spiders (issue 35: spiders.worker.start, spiders.middlewares.cookies) -------------
def crawl_start(crawlid: str) -> str:
    """hash: who turns a crawl's ``start()`` into tasks, once for the crawl (``owner`` job, ``until``: the claim's
    end in Redis microseconds, ``done``, ``phantom``: the one pending count the claim holds in ``pending:{seeds}``
    until the start requests are all in ``seeds``, so the crawl cannot finish before). Hash tag ``seeds``."""
    return f"start:{{{SEEDS}}}:{crawlid}"


def spider_crawl(spider_type: str) -> str:
    """string: the crawl that workers of a spider type (``<project>.<spider>``) started without a crawl id join
    (``scrapy crawl`` with the fleet's add-on); replaced by the next worker once that crawl has ended."""
    return f"spidercrawl:{spider_type}"


def cookie_jar(crawlid: str, jar: str) -> str:
    """hash: one cookie jar of a crawl, shared by every worker of the crawl (``meta["cookiejar"]``, ``""`` for
    the default jar): ``<domain> <path> <name>`` -> the cookie as JSON (hash tag: the crawl)."""
    return f"cookies:{{{crawlid}}}:{jar}"


def crawl_scrapy_stats(crawlid: str) -> str:
    """hash: job -> that worker's Scrapy stats (JSON), written every few seconds and at its end, so that the
    crawl's page sums them over its workers."""
    return f"crawl:{crawlid}:scrapystats"


# --- pause and resume (issue 42; a paused crawl's tasks are parked where they were, still counted as pending) ---
PAUSED = "crawls:{seeds}:paused"
"""hash: crawlid -> Redis time it was paused, for every paused crawl (``crawl:<crawlid>``'s ``state`` says
``paused`` too). Same slot as ``seeds``: the dispatcher parks a paused crawl's tasks in one call that checks it,
and a resume takes the crawl out of it and moves its parked tasks back in one (``messaging.pause``)."""


def parked_seeds(crawlid: str) -> str:
    """zset: a paused crawl's tasks taken out of ``seeds`` (score: their ``seeds`` score, so that a resume puts them
    back in their place), still counted in ``pending:{seeds}``."""
    return f"parked:{{{SEEDS}}}:{crawlid}"


CRAWL_STATES_CHANNEL = "crawls:states"
"""pub/sub channel: ``<crawlid> <state>`` each time a crawl is paused, resumed or stopped, so that every worker
hands back or takes up the crawl's tasks at once (a worker that missed it reads the state within
CRAWLFLEET_CRAWL_REFRESH)."""


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


def requeue_outbox(job: str, domain: str) -> str:
    """set: a retired job's tasks of the domain, on their way back to ``seeds`` (crash-safe requeue)."""
    return f"{job}:{{{_tag(domain)}}}:requeue"


def parked(job: str, domain: str) -> str:
    """zset: the job's tasks of paused crawls, handed back from its queue and leases (score: their queue score),
    still counted in ``pending:{<domain>}``; the job's worker puts them back into its queue when their crawl resumes,
    and the master collects them with the rest of a retired job's tasks."""
    return f"{job}:{{{_tag(domain)}}}:parked"


def job_domains(job: str) -> str:
    """set: the domains for which the job has (or recently had) a queue; spares the master a SCAN."""
    return f"{job}:domains"


# --- a job's ready index (hash tag: the job; frontier/client/ready.py) --------------------------------------------
def ready(job: str) -> str:
    """zset: the job's domains that may have queued tasks -> when each may next be fetched (us, Redis clock)."""
    return f"{job}:{{{job}}}:ready"


def ready_tasks(job: str) -> str:
    """string: the job's queued (not leased) tasks, a gauge kept by landing, take and requeue (for autoscalers)."""
    return f"{job}:{{{job}}}:readytasks"


def ready_tasks_type(spider_type: str) -> str:
    """string: queued (not leased) tasks of every job of the spider type: one key for an autoscaler (KEDA)."""
    return f"readytasks:{spider_type}"


def queue_pattern(job: str = "*") -> str:
    """SCAN pattern of domain queues (of one job, or every job)."""
    return f"{job}:{{*}}:queue"


def inflight_pattern(job: str = "*") -> str:
    """SCAN pattern of lease sets (of one job, or every job)."""
    return f"{job}:{{*}}:inflight"


def parked_pattern(job: str = "*") -> str:
    """SCAN pattern of the parked tasks of paused crawls (of one job, or every job)."""
    return f"{job}:{{*}}:parked"


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


BLOCKS_CHANNEL = "blocks"
"""pub/sub channel: ``<domain> <microseconds left>`` each time a block (``block:{<domain>}``) is set or extended, so
that every worker holds back the hits it reserved on the domain before the 429/503 came (frontier/blocks.py)."""


def robots(domain: str, host: str) -> str:
    """string: the cached robots.txt of one host of the domain (robots.txt is per host, and per port when the URL
    names one), shared by every worker, with a TTL. The domain is the hash tag."""
    return f"robots:{{{_tag(domain)}}}:{host}"


def robots_lock(domain: str, host: str) -> str:
    """string with TTL: the claim token of the one process of the cluster that fetches the host's robots.txt,
    renewed by its holder while the fetch runs."""
    return f"robots:{{{_tag(domain)}}}:{host}:lock"


# --- robots.txt outages (RFC 9309 2.3.1.3; hash tag: the domain) -------------------------------------------------
def robots_down(domain: str, host: str) -> str:
    """hash: the host's robots.txt is unreachable (5xx, network error): ``since`` (first failure, Redis time),
    ``retry_at``, ``failures``, ``why``; the host is not crawled until a fetch succeeds or the outage outlasts
    CRAWLFLEET_ROBOTS_OUTAGE_LIMIT. Deleted by the first successful fetch."""
    return f"robots:{{{_tag(domain)}}}:{host}:down"
# --- paced hits and adaptive delay (hash tag: the domain; frontier/lua/pace.lua) --------------------------------
def pace_type(spider_type: str, domain: str) -> str:
    """hash: the token bucket that spaces the hits of one spider type on the domain (``at``: Redis time of its last
    hit, µs; ``tokens``: tokens left then), refilled at the site's rate up to its burst; ``seq`` counts its hits
    (a hit's member in the windows is ``<slot>-<seq of this bucket>.<seq of the IP's>``, unique in both), ``n``
    those since its window was last trimmed of hits that left it, ``size`` a bound of its window's members (the
    window is read only when it reaches the rate's limit) and ``until`` when it and its window expire (extended
    together, not on every hit)."""
    return f"{spider_type}:{{{_tag(domain)}}}:pace"


def pace_ip(ip: str, domain: str) -> str:
    """hash: the token bucket that spaces the hits from one host IP identity on the domain, of every spider type."""
    return f"{ip}:{{{_tag(domain)}}}:pace"


def adaptive(domain: str) -> str:
    """hash: the domain's adaptive delay shared by every worker (``delay``: spacing in µs; ``latency``: smoothed
    response time in µs; ``errors``: 5xx/timeouts in a row; ``at``: Redis time of the last sample)."""
    return f"adaptive:{{{_tag(domain)}}}"


# --- dedup -------------------------------------------------------------------------------------------------------
def bloom_meta(namespace: str) -> str:
    """hash: a Bloom filter's spec (capacity, error rate, groups, shards, counting, growth), shared by all workers."""
    return f"bloom:{_bloom_namespace(namespace)}:meta"


def bloom_shard(namespace: str, shard: int) -> str:
    """hash: one shard's layout (layers, part keys), inserted counts and TTL; hash tag: namespace and shard."""
    return f"bloom:{_bloom_namespace(namespace)}:{{{namespace}:{shard}}}:meta"


def bloom_part(namespace: str, shard: int, layer: int, part: int) -> str:
    """string: one part of a layer of a shard (a slice of every group's bit or counter array); same hash tag."""
    return f"bloom:{_bloom_namespace(namespace)}:{{{namespace}:{shard}}}:l{layer}:p{part}"


def bloom_pattern(namespace: str) -> str:
    """SCAN pattern of a filter's keys (a namespace that extends this one with ``:…`` matches too)."""
    return f"bloom:{_bloom_namespace(namespace)}:*"


def _bloom_namespace(namespace: str) -> str:
    if not namespace or any(ch in namespace for ch in "{}*?[]\\"):
        raise ValueError(f"a Bloom namespace is non-empty, without braces or glob characters: {namespace!r}")
    return namespace


# --- revisits (continuous crawling; hash tag: seeds) -------------------------------------------------------------
REVISIT_CRAWLS = "revisit:{seeds}:crawls"
"""set: crawls that have a revisit schedule (the leading master moves their due URLs back to ``seeds``)."""


def revisit_due(crawlid: str) -> str:
    """zset: a crawl's revisitable URLs that wait for their next fetch -> when it is due (Redis time). Same slot as
    ``seeds``: one Lua call takes a due URL out and pushes its revisit task (``frontier.revisit``)."""
    return f"revisit:{{seeds}}:due:{crawlid}"


def revisit_out(crawlid: str) -> str:
    """zset: a crawl's URLs whose revisit task is in ``seeds``, a queue or a lease -> the time it was due. A URL is in
    exactly one of ``revisit_due`` and ``revisit_out`` while the crawl revisits."""
    return f"revisit:{{seeds}}:out:{crawlid}"


def revisit_state(crawlid: str) -> str:
    """hash: URL -> JSON of its revisit state: interval, generation, stored validators (ETag, Last-Modified), main-text
    digest and the task to fetch it with."""
    return f"revisit:{{seeds}}:state:{crawlid}"


def revisit_stats(crawlid: str) -> str:
    """hash: a crawl's revisit counts: URLs scheduled, sum of their intervals, revisits ``changed``, ``unchanged``
    (of which ``not_modified``: answered 304), ``failed``."""
    return f"revisit:{{seeds}}:stats:{crawlid}"


# --- registries --------------------------------------------------------------------------------------------------
WORKERS = "workers"
"""zset: job ids by last heartbeat (Redis time)."""


def worker(job: str) -> str:
    """hash: job id, spider type, ip, host, pid, start time, completions."""
    return f"worker:{job}"


def worker_crawls(job: str) -> str:
    """set with TTL (CRAWLFLEET_CRAWL_TTL after the last addition): the crawls a worker stored items for, so that
    the manager's ``/items/<project>/<spider>/<job>.jl`` reads those collections only (the items carry ``job``)."""
    return f"worker:{job}:crawls"


RETIRED_WORKERS = "workers:{workers}:retired"
"""zset: job ids declared dead (fenced: their later writes are refused), by retirement time."""

WORKER_STORES = "workers:{workers}:stores"
"""hash: job id -> JSON of its item store refusing writes (``messaging.storage.StoreState``: since, the reason, the
items waiting by crawl), written with each heartbeat while it lasts; the field is deleted when the store takes writes
again or the job is forgotten."""


def worker_activity(job: str) -> str:
    """hash: a job's completions and busy flags per Redis-clock minute, lifetime completions, outstanding tasks.

    Hash tag ``workers``: the scripts that count a completion check ``RETIRED_WORKERS`` in the same call.
    """
    return f"workers:{{workers}}:activity:{job}"

MANAGERS = "managers"
"""zset: manager hosts by last heartbeat."""


def manager(host: str) -> str:
    """hash: a manager's API URL and node name."""
    return f"manager:{host}"


# --- per-site counts of the workers (the Sites page) -------------------------------------------------------------
def site_statuses(domain: str) -> str:
    """hash: HTTP status (or ``error``) -> responses the workers received from the domain (hash tag: the domain)."""
    return f"site:{{{_tag(domain)}}}:statuses"


def crawl_reasons(crawlid: str) -> str:
    """hash: why pages of the crawl gave no item (HTTP errors, items dropped by a pipeline, spider errors) -> count,
    tallied by the workers' metrics extension; the crawl's page shows its dropped items and spider errors (its
    failed pages come from the exact counts, ``crawl_totals``)."""
    return f"crawl:{crawlid}:reasons"


# --- the managers' chart history ---------------------------------------------------------------------------------
STATS_HISTORY = "history:stats"
"""zset: one JSON sample per minute (score: the minute's start, Redis time) of the fleet's pages per minute by
spider type and HTTP status, queue depths and workers: the Stats page's charts over the last day, whichever manager
wrote it."""


def stats_history_claim(minute: int) -> str:
    """string with TTL: the manager that samples this minute (one sample per minute however many managers run)."""
    return f"history:stats:claim:{minute}"


# --- master ------------------------------------------------------------------------------------------------------
MASTER_EPOCH = "master:{seeds}:epoch"
"""string: the epoch of the dispatcher leader allowed to write (fencing); same slot as ``seeds``."""


def master_staging(epoch: int | str) -> str:
    """hash: batch id -> tasks taken from ``seeds`` by the leader of this epoch, not yet settled."""
    return f"master:{{seeds}}:staging:{epoch}"


MASTER_STAGING_EPOCHS = "master:{seeds}:staging-epochs"
"""set: epochs whose staging hash may hold batches (the next leader settles them)."""


def dispatch_landed(domain: str, batch: str) -> str:
    """string with TTL: ``landed`` or ``revoked`` — whether a staged batch's tasks of the domain reached their queue."""
    return f"master:{{{_tag(domain)}}}:landed:{batch}"


def requeue_marker(job: str, domain: str) -> str:
    """string with TTL: a retired job's tasks of the domain were already put back into ``seeds`` (same slot)."""
    return f"master:{{seeds}}:requeued:{job}:{domain}"


def dispatched_minutes(spider_type: str) -> str:
    """hash: Redis-clock minute -> tasks dispatched to workers of the spider type (the window cap, seed "is_max")."""
    return f"master:{{seeds}}:dispatched:{spider_type}"


def dispatched_jobs(spider_type: str) -> str:
    """hash: ``<minute>:<job>`` -> tasks dispatched to that worker of the spider type in that Redis-clock minute.

    The window cap counts only the live workers' fields, so that a rolling restart (every worker of a type
    replaced) does not hold the new workers back by what the departed ones were given."""
    return f"master:{{seeds}}:dispatched-jobs:{spider_type}"


DISPATCH_WAITS = "master:{seeds}:waits"
"""hash: crawlid -> JSON of why the dispatcher's latest look left the crawl's tasks in ``seeds`` (``at``: Redis time;
``waits``: reason ``paced`` with the domain, the tasks it holds and its quota, ``no_worker`` or ``backlog_full`` with
the spider type; each with the tasks passed by). Written by the leader at most once a second (``master.waits``),
read by the info answer and the crawl page (``messaging.waits``)."""

DISPATCH_ROOM = "master:{seeds}:room"
"""hash: spider type -> JSON of the room the dispatcher found for it in its latest round: live workers, those with
nothing due (their queues hold only tasks waiting for their sites' next slots), tasks they hold against their
bounds, the tasks it could hand out (``budget``) and the Redis time (``at``)."""


DEAD_LETTERS = "master:{seeds}:dead-letters"
"""list: the latest tasks the dispatcher could not place (JSON: task, reason, crawlid, time), newest first, capped.
Same slot as ``seeds``: a task leaves ``seeds`` and its pending count and lands here in one call."""

DEAD_LETTER_COUNTS = "master:{seeds}:dead-letter-counts"
"""hash: crawlid -> tasks of the crawl that were dead-lettered (the info answer's ``dead_letters``)."""

DEAD_LETTER_OUTBOX = "master:{seeds}:dead-letter-outbox"
"""list: dead-letter records not yet produced to the failed topic; the leader sends them, then trims them off."""


# --- outbound records (messaging.delivery) ----------------------------------------------------------------------
def delivery_note(record_id: str) -> str:
    """string with TTL: ``topic, partition, offset, state`` (tab-separated) of an outbound record (its id: an event's
    ``event_id``, an answered request's stream entry, a rejected record's offset), written before its first attempt
    (``sending``: it will be found from that offset on) and again once Kafka acknowledged it (``sent``). The next
    sender of the same record (a retry, a new leader, a monitor handling a redelivered request) sends nothing for a
    ``sent`` note and, for a ``sending`` one, reads the partition for the record's id first (``messaging.delivery``).
    Kept for CRAWLFLEET_INTAKE_DEDUP_TTL."""
    return f"delivery:{record_id}"


# --- stats (seed tables 4-4, 4-5, 4-6) ---------------------------------------------------------------------------
def stats_counter(module: str, plugin: str, window: str | int) -> str:
    """counter: what a module's plugin did in the window: seconds (a hash of time buckets, ``messaging.stats``),
    ``step<seconds>`` (a hash of fixed periods) or ``lifetime`` (a string)."""
    return f"stats:{module}:{plugin}:{window}"


def stats_alive(module: str, ip: str) -> str:
    """string with TTL: the module runs on that host."""
    return f"stats:{module}:{ip}"


def stats_crawler(spider_type: str, status: int | str, window: str | int) -> str:
    """counter: responses of a spider type with an HTTP status in the window (the module ``crawler``'s counters,
    whose plugin is ``<spider_type>:<status>``)."""
    return f"stats:crawler:{spider_type}:{status}:{window}"


def metrics_endpoint(module: str, host: str, pid: int) -> str:
    """string with TTL: where a process serves its Prometheus /metrics."""
    return f"metrics:{module}:{host}:{pid}"


METRICS_INDEX = "endpoints:metrics"
"""set: the ``metrics:<module>:<host>:<pid>`` keys registered, so that discovery (``messaging.discovery``) reads
the endpoints without a scan of the keyspace; a member whose key has expired is removed by the next reader."""


# --- schedules (issue 42: crawls on a cron schedule; hash tag: seeds, fenced by the master epoch) ----------------
SCHEDULES = "schedules:{seeds}"
"""set: the names of the schedules (``crawlfleet schedule add``); the leading master fires their due times."""


def schedule(name: str) -> str:
    """hash: one schedule: ``cron``, ``tz``, ``request`` (the crawl request it submits, JSON), ``created``,
    ``paused`` (since when), ``after`` (due times after this are still to fire), ``pending``/``pending_crawlid``
    (a firing begun, not yet recorded), the last firing (``last_due``, ``last_crawlid``, ``last_fired``,
    ``last_late``, ``last_outcome``) and the due times skipped past the grace period (``missed``, ``last_missed``).
    Same slot as ``seeds``: the leader's firing steps check ``MASTER_EPOCH`` in the same call."""
    return f"schedule:{{seeds}}:{name}"


def schedule_history(name: str) -> str:
    """list: a schedule's latest firings and skipped times (JSON: due, crawl id, fired, late, outcome), newest
    first, capped."""
    return f"schedule:{{seeds}}:{name}:history"


# --- notifications (issue 42: webhooks per crawl event; hash tag: notify) ---------------------------------------
NOTIFY_DUE = "notify:{notify}:due"
"""zset: id of a notification still to deliver -> when its next attempt is due (Redis time)."""


def notify_event(event_id: str) -> str:
    """hash: one notification (an event of a crawl for one receiver): ``state`` (pending, delivered, failed),
    ``url``, ``body`` (the event, JSON), ``attempts``, ``claimed`` (until when a sender holds it), ``status`` and
    ``error`` of the last attempt, ``created``, ``delivered``. Kept for CRAWLFLEET_CRAWL_TTL once delivered or given
    up, so that the same event is never enqueued, nor sent, again."""
    return f"notify:{{notify}}:event:{event_id}"


NOTIFY_PROGRESS = "notify:{notify}:progress"
"""hash: crawlid -> ``<progress> <since> <alerted>``: a running crawl's counts as last seen, since when they have
not moved (Redis time), and whether its ``stalled`` event was raised (master/notifier.py)."""


# --- health checks ----------------------------------------------------------------------------------------------
def health(who: str) -> str:
    """string with TTL: written by a health check (``crawlfleet services status``, the fleet's supervisor) to prove
    that Redis takes writes, not merely answers PING."""
    return f"health:{who}"


# --- requests waiting for the Redis monitor ----------------------------------------------------------------------
# Every request key and the streams share the hash tag ``requests``: the Kafka monitor stores a request and adds it to
# its kind's stream in one Lua call, and a Redis monitor acknowledges, drops and deletes it in one, on a Redis Cluster
# too.
_REQUESTS_TAG = "{requests}"


def info_request(userid: str, crawlid: str, uuid: str) -> str:
    """string with TTL: an info request (its JSON) waiting for the Redis monitor's info plugin (the redelivery guard
    of its stream entry)."""
    return f"info:{_REQUESTS_TAG}:{userid}:{crawlid}:{uuid}"


def stats_request(userid: str, stats: str, uuid: str) -> str:
    """string with TTL: a stats request (its JSON) waiting for the Redis monitor's stats plugin."""
    return f"statsrequest:{_REQUESTS_TAG}:{stats}:{userid}:{uuid}"


def zk_request(action: str, domain: str, userid: str, uuid: str) -> str:
    """string with TTL: a site-config request (its JSON) waiting for the Redis monitor's zookeeper plugin."""
    return f"zk:{_REQUESTS_TAG}:{action}:{domain}:{userid}:{uuid}"


def stop_request(userid: str, crawlid: str, uuid: str) -> str:
    """string with TTL: a stop request (its JSON) waiting for the Redis monitor's stop plugin."""
    return f"stop:{_REQUESTS_TAG}:{userid}:{crawlid}:{uuid}"


def pause_request(userid: str, crawlid: str, uuid: str) -> str:
    """string with TTL: a pause request (its JSON) waiting for the Redis monitor's pause plugin."""
    return f"pause:{_REQUESTS_TAG}:{userid}:{crawlid}:{uuid}"


def resume_request(userid: str, crawlid: str, uuid: str) -> str:
    """string with TTL: a resume request (its JSON) waiting for the Redis monitor's resume plugin."""
    return f"resume:{_REQUESTS_TAG}:{userid}:{crawlid}:{uuid}"


def request_stream(kind: str) -> str:
    """stream: the requests of one kind (``info``, ``stats``, ``site``, ``stop``, ``pause``, ``resume``) for the Redis
    monitors, read through their consumer group: entry ``key`` (the request key) and ``request`` (its JSON). An entry
    leaves the stream when its answer is acknowledged by Kafka; a monitor that died with it leaves it pending for
    another (XAUTOCLAIM)."""
    return f"requests:{_REQUESTS_TAG}:{kind}"


def stats_pattern(module: str = "*") -> str:
    """SCAN pattern of a module's stats keys (counters and alive keys)."""
    return f"stats:{module}:*"


@dataclass(frozen=True)
class StatsKey:
    module: str
    plugin: str = ""  # empty for an alive key
    window: str = ""  # seconds, ``lifetime`` or ``step<seconds>``; empty for an alive key
    ip: str = ""  # set for an alive key


def parse_stats_key(key: str | bytes) -> StatsKey:
    """Split ``stats:<module>:<plugin>:<window>`` or ``stats:<module>:<ip>`` back into its parts.

    A plugin may hold colons (the crawler's ``<spider_type>:<status>``); an IPv6 address too, but its segments are
    never a window, so the last segment decides.
    """
    text = key.decode() if isinstance(key, bytes) else key
    prefix, _, rest = text.partition(":")
    module, _, tail = rest.partition(":")
    if prefix != "stats" or not module or not tail:
        raise ValueError(f"not a stats key: {text!r}")
    plugin, _, window = tail.rpartition(":")
    is_window = window.isdigit() or window == "lifetime" or (window.startswith("step") and window[4:].isdigit())
    if plugin and is_window and all(plugin.split(":")):
        return StatsKey(module, plugin, window)
    return StatsKey(module, ip=tail)


def intake_seen(digest: str) -> str:
    """string with TTL: a request with this content hash was already enqueued (redelivery guard).

    Hash-tagged ``{seeds}``: it lives in the slot of ``seeds``, so that one Lua call can check it and enqueue.
    """
    return f"intake:seen:{{{SEEDS}}}:{digest}"


def _tag(domain: str) -> str:
    """The domain as a hash tag; :class:`messaging.domains.InvalidDomain` (a ValueError) when it breaks the one
    host rule (:func:`messaging.domains.host_problem`), which the intake and the dispatcher apply too."""
    problem = host_problem(domain)
    if problem is not None:
        raise InvalidDomain(f"no domain-scoped key for {domain!r}: {problem}")
    return domain

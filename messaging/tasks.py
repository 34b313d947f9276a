"""A crawl task as it travels through Redis: ``seeds`` → a worker's domain queue → its leases → acknowledged.

A task is one URL of one crawl. It is stored as compact JSON with sorted keys, so that the same task is always the
same zset member (re-pushing it is idempotent) and a member can be removed by value; empty fields are left out. The
crawl's rule is not copied into every task: it is stored once in ``crawl:<crawlid>``.

A task of the fleet's rule spiders is a URL, its page kind (``callback``) and a few values for the child (``meta``).
A task of one's own Scrapy spider (issue 35) is a whole ``scrapy.Request`` (``spiders.travel``): ``callback`` is the
callback's name, ``meta`` the request's JSON meta, and ``request`` the rest of what ``Request.to_dict`` keeps — the
request's fingerprint ``fp`` (the project's ``REQUEST_FINGERPRINTER_CLASS``, what the crawl's Bloom filter and exact
counts key it by) and, when they differ from a GET's defaults, ``method``, ``headers``, ``body`` (or ``body64``),
``cookies``, ``cb_kwargs``, ``errback``, ``dont_filter``, ``flags``, ``encoding``, ``priority`` (Scrapy's) and the
request ``class`` with its extra ``attrs``. A rule task has no ``request``, so its encoding is what it always was.

Queue order: lower score pops first (``ZPOPMIN``). In ``seeds`` the score puts higher priorities first and keeps
arrival order (first in, first out) within a priority.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from messaging import keys
from messaging.clients import RedisClient
from messaging.domains import domain_of
from messaging.scripts import LUA, lua_constants, lua_script, lua_source

MIN_PRIORITY = 0
MAX_PRIORITY = 255
DEFAULT_PRIORITY = 100
# Arrival numbers below 2**44 keep every score an exact integer in a double (255 * 2**44 < 2**53).
ARRIVAL_SPAN = 2**44
# The seeds score is computed in Lua only (messaging/lua/seeds_score.lua): prepend this to a script that uses it.
SEEDS_SCORE_LUA = lua_source(LUA / "seeds_score.lua",
                             prefix=lua_constants(MAX_PRIORITY=MAX_PRIORITY, ARRIVAL_SPAN=ARRIVAL_SPAN))


def check_priority(priority: int) -> int:
    """The priority, or ValueError when it is outside ``MIN_PRIORITY..MAX_PRIORITY`` (its seeds score would not
    sort)."""
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority {priority} outside {MIN_PRIORITY}..{MAX_PRIORITY}")
    return priority


ORDER_SPAN = 2**18  # one step of a request's own (Scrapy) priority in a queue score: above every (priority, depth)
ORDER_LIMIT = 2**30  # Scrapy priorities beyond ±this share the extreme place (the score stays an exact double)


def queue_score(priority: int, depth: int = 0, order: int = 0) -> float:
    """Score in a worker's domain queue: a higher ``order`` first (a Scrapy request's own ``priority``, 0 for rule
    tasks), then higher priority, then shallower pages (breadth first)."""
    order = max(-ORDER_LIMIT, min(ORDER_LIMIT, int(order)))
    return float((MAX_PRIORITY - priority) * 1024 + min(depth, 1023) - order * ORDER_SPAN)


def request_order(task: dict[str, Any]) -> int:
    """A task's own Scrapy priority (its queue ``order``), from its decoded JSON: 0 for a rule task."""
    request = task.get("request")
    return int(request.get("priority", 0)) if isinstance(request, dict) else 0


@dataclass(frozen=True)
class Task:
    url: str
    crawlid: str
    spider_type: str
    userid: str = ""
    priority: int = DEFAULT_PRIORITY
    depth: int = 0
    callback: str = ""  # which of the spider's page kinds the URL is (e.g. the list spider's "detail")
    referer: str = ""
    meta: dict[str, Any] = field(default_factory=dict)  # small values the spider carries to the child (list fields)
    revisit: dict[str, Any] = field(default_factory=dict)  # generation, stored validators (frontier.revisit)
    request: dict[str, Any] = field(default_factory=dict)  # a Scrapy request's other fields (module docstring)
    retry: int = 0  # n: re-submitted by `crawlfleet retry` number n (messaging.failures); 0 for every other task

    @property
    def domain(self) -> str:
        return domain_of(self.url)

    @property
    def travels(self) -> bool:
        """Whether this is a whole Scrapy request of one's own spider (not a rule spider's URL)."""
        return bool(self.request)

    def encode(self) -> str:
        # A shallow view of the fields (dataclasses.asdict deep-copies, and dominated the Kafka monitor's profile).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data = {key: value for key, value in data.items() if value not in ("", {}, None)}
        if not self.retry:
            del data["retry"]  # most tasks: their members stay what they were before retries existed
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, raw: str | bytes) -> Task:
        data = json.loads(raw)
        return cls(**data)

    def child(self, url: str, callback: str = "", meta: dict[str, Any] | None = None) -> Task:
        """A task for a link found on this task's page: same crawl, one level deeper."""
        return Task(url=url, crawlid=self.crawlid, spider_type=self.spider_type, userid=self.userid,
                    priority=self.priority, depth=self.depth + 1, callback=callback, referer=self.url,
                    meta=meta or {})


# Fields of the ``crawl:<crawlid>`` hash (docs/architecture.md: rule, spider type, user, limits, state, counts).
class CrawlFields:
    RULE = "rule"  # JSON of the crawl's rule
    SPIDER_TYPE = "spider_type"
    USERID = "userid"
    URL = "url"  # the start URL
    MAXDEPTH = "maxdepth"
    MAX_PAGES = "max_pages"
    DOMAIN_MAX_PAGES = "domain_max_pages"
    COOKIE = "cookie"
    STATE = "state"  # running | paused | stopped | finished
    PAUSED = "paused"  # Redis time the crawl was paused (while it is: messaging.pause)
    RETRIES = "retries"  # how many times `crawlfleet retry` re-submitted its failed pages (messaging.failures)
    CREATED = "created"  # Redis time of the request
    FINISHED = "finished"
    FINISH_EVENT = "finish_event"  # pending | sent: the crawl_finished event's delivery (master.finisher)
    PAGES = "pages"  # responses processed (completed tasks)
    ITEMS = "items"  # items stored
    ENQUEUED = "enqueued"  # tasks ever put into seeds
    UNTIL = "until"  # Unix time after which a revisiting crawl stops revisiting (frontier.revisit)
    NOTIFY = "notify"  # JSON {"url", "on"}: where the crawl's events are POSTed (messaging.notify)
    # a crawl of one's own Scrapy spider (issue 35): its spider type is "<project>.<spider>", it has no rule
    PROJECT = "project"
    SPIDER = "spider"
    ARGS = "args"  # JSON {name: value}: the spider's arguments (-a)
    SETTINGS = "settings"  # JSON {NAME: value}: Scrapy settings of every worker (-s)
    VERSION = "version"  # a deployed project's version and its egg's SHA-256, pinned for every worker
    SHA256 = "sha256"
    PRIORITY = "priority"  # the crawl's priority (0..255): its tasks' seeds order
    PARTITION = "partition"  # the rule's queue partition (host, domain, ip); absent: CRAWLFLEET_PARTITION


class CrawlState:
    RUNNING = "running"
    PAUSED = "paused"  # nothing of it is fetched, its tasks are parked, it does not finish (messaging.pause)
    STOPPED = "stopped"
    FINISHED = "finished"


PUSH_SEEDS = lua_script(LUA / "push_seeds.lua", prefix=SEEDS_SCORE_LUA)


def push_seeds_call(tasks: list[Task], guards: list[str] | None = None,
                    guard_ttl: int = 0) -> tuple[list[str], list[Any]]:
    """Keys and arguments of :data:`PUSH_SEEDS` for ``tasks`` (for callers that pipeline the call).

    ``guards``, one key per task, make each push conditional: a task is pushed only when its guard key did not exist
    (it is then set with ``guard_ttl``) — the Kafka monitor's idempotence keys, so that a redelivered request is
    not enqueued twice, atomically with the enqueue.
    """
    if guards is not None and len(guards) != len(tasks):
        raise ValueError("one guard key per task")
    if guards and guard_ttl <= 0:
        raise ValueError("guard keys need a positive TTL")
    args: list[Any] = [guard_ttl]
    for task in tasks:
        check_priority(task.priority)  # refuse an out-of-range priority before anything is written
        args += [task.encode(), task.priority, task.crawlid]
    return [keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS, *(guards or [])], args


def push_seeds(redis: RedisClient, tasks: list[Task], guards: list[str] | None = None, guard_ttl: int = 0) -> int:
    """Put tasks into ``seeds`` in one round trip (one Lua call); returns how many were new there.

    Arrival numbers come from ``seeds:sequence`` (incremented in the same call) so that concurrent pushers (Kafka
    monitors, workers pushing children) keep first-in first-out order within a priority. A task already in ``seeds``
    (the same member) is left where it is (``ZADD NX``): re-pushing after a crash is harmless. Each new task is
    counted in its crawl's ``pending:{seeds}`` entry in the same call, which is what lets the master tell exactly
    when a crawl has nothing left (``master.finisher``). Every key shares the hash tag ``seeds`` (Redis Cluster).
    ``guards``: see :func:`push_seeds_call`.
    """
    if not tasks:
        return 0
    script_keys, args = push_seeds_call(tasks, guards, guard_ttl)
    codes = PUSH_SEEDS.on(redis)(keys=script_keys, args=args, client=redis)
    return sum(1 for code in codes if int(code) == 1)

"""What an entry of ``seeds`` is to the dispatcher: its task, the queue (domain) and score it goes to, or why it cannot
be placed (:class:`Unplaceable`: the dispatcher dead-letters it, ``master.staging``).

**The partition** (issue 37, item 2): a task's queue key is its host, its registered domain or its host's IP
address, as its crawl's rule says (``"partition"``, stored in ``crawl:<id>`` by the Kafka monitor) or, without
one, the fleet's CRAWLFLEET_PARTITION (:class:`Partitioner`). The address of a host is resolved here, at dispatch,
by :class:`messaging.hostmap.AddressCache` on threads of its own: a task whose host is being resolved for the first
time waits in ``seeds`` for the next round, the dispatch loop never waits for a resolver."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from master.staging import DeadLetter
from messaging import keys
from messaging.clients import as_text
from messaging.domains import DOMAIN, HOST, IP, PARTITIONS, domain_of, domain_of_host, host_of, partition_key
from messaging.hostmap import AddressCache
from messaging.tasks import DEFAULT_PRIORITY, CrawlFields, queue_score, request_order


class Unplaceable(ValueError):
    """A task in ``seeds`` that no worker can be given (it goes to the dead letters); ``path`` says where."""

    def __init__(self, message: str, path: str = "$.url") -> None:
        super().__init__(message)
        self.path = path


@dataclass
class Entry:
    """One entry of ``seeds`` as a round reads it: its task, domain and queue score, or the dead letter it makes."""

    member: str
    score: float
    task: dict[str, Any]
    domain: str = ""
    queue_score: float = 0.0
    letter: DeadLetter | None = None
    pool: str = ""  # the workers it may go to (master.dispatcher.pool_of)
    resolving: bool = False  # partitioned by IP, its host's address is being resolved: the next round places it


def parse_task(member: str) -> dict[str, Any]:
    """The task of a ``seeds`` member, with a string crawlid and spider type; :class:`Unplaceable` otherwise."""
    try:
        task = json.loads(member)
    except ValueError as exc:
        raise Unplaceable(f"not a JSON task: {exc}", "$") from None
    if not isinstance(task, dict):
        raise Unplaceable("a task is a JSON object", "$")
    for name in ("spider_type", "crawlid"):
        if not isinstance(task.get(name), str) or not task[name]:
            raise Unplaceable(f"a task needs a {name}", f"$.{name}")
    return task


class Partitioner:
    """Each task's queue key under its crawl's partition (see the module docstring). The crawls' partitions are read
    once per crawl (:meth:`learn`: one pipelined read for the crawls a chunk of ``seeds`` brings that it does not
    know) and remembered."""

    def __init__(self, redis: Any, default: str = DOMAIN, addresses: AddressCache | None = None,
                 limit: int = 100_000, blacklisted: Callable[[str], bool] | None = None) -> None:
        """``blacklisted(name)``: whether a host (or its domain) is blacklisted (the site configs the workers
        apply); such a host of a crawl partitioned by IP is keyed by its name, not its address, so that the
        worker's take drops its queue as blacklisted instead of fetching it among the address's other sites."""
        if default not in PARTITIONS:
            raise ValueError(f"CRAWLFLEET_PARTITION: {default!r} is not one of {', '.join(PARTITIONS)}")
        self.redis = redis
        self.default = default
        self._addresses = addresses
        self.limit = limit
        self.blacklisted = blacklisted
        self._modes: dict[str, str] = {}  # crawlid -> its partition

    @property
    def addresses(self) -> AddressCache:
        if self._addresses is None:  # made when a crawl first asks for the partition by IP
            self._addresses = AddressCache()
        return self._addresses

    def learn(self, crawlids: Iterable[str]) -> None:
        """Read the partitions of the crawls not known yet (one round trip)."""
        unknown = sorted({crawlid for crawlid in crawlids if crawlid not in self._modes})
        if not unknown:
            return
        if len(self._modes) + len(unknown) > self.limit:
            self._modes = {}
        pipe = self.redis.pipeline(transaction=False)
        for crawlid in unknown:
            pipe.hget(keys.crawl(crawlid), CrawlFields.PARTITION)
        for crawlid, raw in zip(unknown, pipe.execute(), strict=True):
            mode = as_text(raw) if raw is not None else self.default
            self._modes[crawlid] = mode if mode in PARTITIONS else self.default

    def mode(self, crawlid: str) -> str:
        """The crawl's partition (read now if it is not known: one round trip per crawl and leader)."""
        if crawlid not in self._modes:
            self.learn([crawlid])
        return self._modes.get(crawlid, self.default)

    def key(self, url: str, crawlid: str) -> str | None:
        """The queue key of ``url`` in its crawl's partition; ``None`` while its host's address is being resolved."""
        mode = self.mode(crawlid)
        if mode == DOMAIN:
            return fast_domain(url)
        if mode == HOST:
            return partition_key(url, HOST)
        host = host_of(url)
        if self.blacklisted is not None and self.blacklisted(host):
            return partition_key(url, HOST)
        address = self.addresses.address(host)
        return None if address is None else partition_key(url, IP, address)


def placement(task: dict[str, Any], partitioner: Partitioner | None = None) -> tuple[str | None, float]:
    """The task's queue key (every domain-scoped key is formed from it: its domain, host or address, as its crawl is
    partitioned; ``None`` while its host's address is being resolved) and its score in a queue; or
    :class:`Unplaceable` with the reason, under the one host rule the key builder applies."""
    url = task.get("url")
    if not isinstance(url, str):
        raise Unplaceable("a task needs a url")
    try:
        domain = fast_domain(url) if partitioner is None else partitioner.key(url, task["crawlid"])
        if domain is not None:
            keys.queue("-", domain)  # the key builder's own check, in case a rule ever diverges from domain_of's
    except ValueError as exc:  # InvalidDomain, or a URL urlsplit refuses
        raise Unplaceable(f"no usable host in {url[:200]!r}: {exc}") from None
    try:
        return domain, queue_score(int(task.get("priority", DEFAULT_PRIORITY)), int(task.get("depth", 0)),
                                   request_order(task))
    except (TypeError, ValueError) as exc:
        raise Unplaceable(f"bad priority or depth: {exc}", "$.priority") from None


def fast_domain(url: str) -> str:
    """``domain_of`` with a fast path for plain ``http(s)://host/...`` URLs (the host's domain is cached)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("http", "https"):
        host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if host and not any(ch in host for ch in "@:[%") and host.isascii():
            return domain_of_host(host.lower())
    return domain_of(url)

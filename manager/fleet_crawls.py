"""A deployed project's job is a fleet crawl (issue 35): ``schedule.json`` begins it, its workers run on the cluster.

``schedule.json project=P spider=S [setting=K=V]… [arg=V]… [_version=V] [_workers=N] [_hosts=H,…]`` for a deployed
project (:meth:`FleetCrawls.begin`):

1. pins the version (default: the latest) and its egg's SHA-256, as every deployed job does;
2. writes the crawl, whose id is the job id (``crawl:<jobid>``: project, spider, arguments, settings, version,
   digest; :mod:`messaging.own_crawls`), refusing an id some crawl has already;
3. starts its workers: ``_workers`` (default CRAWLFLEET_MANAGER_WORKERS) processes ``python -m spiders.runner
   --project P --version V --sha256 D --fleet crawl S -s CRAWLFLEET_CRAWL=<jobid> …`` (the pinned egg from each
   host's cache, the fleet's add-on around the project's settings), spread round robin over ``_hosts`` (manager
   host names from the registry, ``*`` for every live one; default this host): this host's through its launcher (the
   first worker's job id is the crawl's, the next ones ``<jobid>.2``, ``<jobid>.3`` …), another host's through its
   manager's ``schedule.json`` with ``_crawl=<jobid>`` (:meth:`FleetCrawls.join`: a worker of that crawl, with its
   pinned version and digest, whatever is deployed by then).

The job's state is its crawl's (:meth:`FleetCrawls.refresh`, every :data:`REFRESH_SECONDS` in a thread): it is
*running* while the crawl runs and a worker serves it somewhere — also when the process of its first worker ended
(killed) while others carry on — and *finished* once the crawl has finished or was stopped (the workers close
themselves then) or nobody serves it any more. ``cancel.json`` of the job stops the crawl (marked stopped, its tasks
purged: ``messaging.redis_monitor.plugins.stop``), which ends its workers on every host, and stops this host's at
once.
"""

from __future__ import annotations

import base64
import json
import logging
import signal
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from twisted.internet import defer

from frontier.registry import WorkerRegistry
from manager.jobs import InvalidJob, Job, check_job_id
from manager.registry import ManagerRegistry
from messaging import keys
from messaging.clients import as_text
from messaging.own_crawls import create_crawl, own_crawl_fields
from messaging.redis_monitor.plugins.stop import stop_crawl
from messaging.tasks import CrawlFields, CrawlState

logger = logging.getLogger(__name__)
REFRESH_SECONDS = 2.0
MAX_WORKERS = 64
EVERY_HOST = "*"
LIVE = frozenset({CrawlState.RUNNING, CrawlState.PAUSED})  # a paused crawl's job runs: its workers wait for a resume


@dataclass(frozen=True)
class CrawlView:
    state: str  # the crawl's state in Redis ("" when it has none)
    served: bool  # a worker serves it: one of this host's jobs is pending or running, or a live registered worker

    @property
    def alive(self) -> bool:
        return self.state in LIVE and self.served


def worker_ids(crawlid: str, count: int) -> list[str]:
    """The job ids of a crawl's workers: the crawl's own id first, then ``<crawlid>.2`` …"""
    return [crawlid if n == 1 else check_job_id(f"{crawlid}.{n}") for n in range(1, count + 1)]


def placement(count: int, here: str, hosts: list[str], live: Iterable[str]) -> list[str]:
    """The host of each of ``count`` workers: round robin over ``hosts`` (this one first when among them)."""
    known = sorted(set(live) | {here})
    chosen = known if hosts == [EVERY_HOST] else (hosts or [here])
    unknown = [host for host in chosen if host not in known]
    if unknown:
        raise InvalidJob(f"_hosts: no live manager {', '.join(map(repr, unknown))} (live: {', '.join(known)})")
    ordered = sorted(set(chosen), key=lambda host: (host != here, host))
    return [ordered[n % len(ordered)] for n in range(count)]


class FleetCrawls:
    """This manager's part in fleet crawls of deployed projects (see the module docstring)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.views: dict[str, CrawlView] = {}  # crawl id -> what refresh() last saw

    # --- begin, join ---------------------------------------------------------------------------------------------
    def begin(self, job: Job, workers: int, hosts: list[str]) -> defer.Deferred[str]:
        """Write the crawl and start its workers (``job``'s version and digest pinned, its spider checked)."""
        if not 1 <= workers <= MAX_WORKERS:
            return defer.fail(InvalidJob(f"_workers must be 1..{MAX_WORKERS}, not {workers}"))
        m = self.manager
        ids = worker_ids(job.job, workers)
        if any(m.known(job_id) for job_id in ids):
            return defer.fail(InvalidJob(f"jobid '{job.job}' is already used (a job id is never reused)"))

        def write() -> list[str]:
            plan = placement(workers, m.host, hosts, self._live_hosts())
            fields = own_crawl_fields(job.project, job.spider, "scrapyd", args=job.args, settings=job.settings,
                                      version=job.version or "", sha256=job.egg_sha256 or "")
            if not create_crawl(m.redis, job.job, fields):
                raise InvalidJob(f"jobid '{job.job}' is already used by a crawl of the cluster")
            return plan

        def start(plan: list[str]) -> Any:
            remote = []
            for job_id, host in zip(ids, plan, strict=True):
                worker = replace(job, job=job_id, crawl=job.job)
                if host == m.host:
                    m.enqueue(worker)
                else:
                    remote.append((host, worker))
            logger.info("fleet crawl %s of %s.%s (version %s): %d workers on %s", job.job, job.project, job.spider,
                        job.version, workers, ", ".join(sorted(set(plan))))
            forwarded = [m.in_thread(self.forward, host, worker) for host, worker in remote]
            return defer.gatherResults(forwarded, consumeErrors=True).addCallback(lambda _: job.job)

        return m.in_thread(write).addCallback(start)

    def join(self, job: Job) -> defer.Deferred[str]:
        """A worker of an existing crawl (``_crawl``: another manager placed it here), with the crawl's pin."""
        m = self.manager
        crawlid = job.crawl or ""

        def read() -> dict[str, str]:
            return {as_text(k): as_text(v) for k, v in m.redis.hgetall(keys.crawl(crawlid)).items()}

        def check(crawl: dict[str, str]) -> str:
            if crawl.get(CrawlFields.STATE) != CrawlState.RUNNING:
                raise InvalidJob(f"crawl '{crawlid}' is not running")
            if (crawl.get(CrawlFields.PROJECT), crawl.get(CrawlFields.SPIDER)) != (job.project, job.spider):
                raise InvalidJob(f"crawl '{crawlid}' is a crawl of {crawl.get(CrawlFields.PROJECT)}."
                                 f"{crawl.get(CrawlFields.SPIDER)}, not of {job.project}.{job.spider}")
            if m.known(job.job):
                raise InvalidJob(f"jobid '{job.job}' is already used (a job id is never reused)")
            job.version = crawl.get(CrawlFields.VERSION) or job.version
            job.egg_sha256 = crawl.get(CrawlFields.SHA256) or job.egg_sha256
            m.enqueue(job)
            return job.job

        return m.in_thread(read).addCallback(check)

    def forward(self, host: str, worker: Job) -> str:
        """Start ``worker`` on another manager of the cluster (blocking): its ``schedule.json`` with ``_crawl``."""
        params = [("project", worker.project), ("spider", worker.spider), ("jobid", worker.job),
                  ("_crawl", worker.crawl or ""), ("priority", str(worker.priority)),
                  *(("setting", f"{name}={value}") for name, value in worker.settings.items()),
                  *worker.args.items()]
        return forward_schedule(self.manager, host, params)

    # --- state ---------------------------------------------------------------------------------------------------
    def crawl_ids(self) -> set[str]:
        m = self.manager
        jobs = [*m.pending(), *(p.job for p in m.running())]
        return {j.crawl for j in jobs if j.crawl} | {r.crawl for r in m.finished() if r.crawl}

    def refresh(self) -> defer.Deferred[None]:
        """Read the states of this manager's crawls (a thread); cheap: one pipeline, the registry when needed."""
        m = self.manager
        local = {j.crawl for j in [*m.pending(), *(p.job for p in m.running())] if j.crawl}
        crawls = sorted(self.crawl_ids())

        def read() -> dict[str, CrawlView]:
            if not crawls:
                return {}
            pipe = m.redis.pipeline(transaction=False)
            for crawlid in crawls:
                pipe.hget(keys.crawl(crawlid), CrawlFields.STATE)
            states = {c: as_text(s or b"") for c, s in zip(crawls, pipe.execute(), strict=True)}
            orphans = {c for c, state in states.items() if state in LIVE and c not in local}
            served = set(local) | (self._served_elsewhere(orphans) if orphans else set())
            return {c: CrawlView(state, c in served) for c, state in states.items()}

        def keep(views: dict[str, CrawlView]) -> None:
            self.views = views

        d = m.in_thread(read).addCallback(keep)
        d.addErrback(lambda f: logger.debug("fleet crawl states unreadable: %s", f.getErrorMessage()))
        return d

    def alive(self, crawlid: str | None) -> bool:
        view = self.views.get(crawlid or "")
        return view is not None and view.alive

    def _served_elsewhere(self, crawls: set[str]) -> set[str]:
        registry = WorkerRegistry(self.manager.redis)
        return {info.crawlid for info in registry.infos(registry.live()).values() if info.crawlid in crawls}

    def _live_hosts(self) -> list[str]:
        m = self.manager
        return [info.host for info in ManagerRegistry(m.redis, m.config.registry_ttl).live()]

    # --- cancel --------------------------------------------------------------------------------------------------
    def cancel(self, crawlid: str, sig: int = signal.SIGTERM) -> str | None:
        """Stop the crawl everywhere and this host's workers now; scrapyd's prevstate of its job (or None)."""
        m = self.manager
        pending = [j for j in m.pending() if j.crawl == crawlid]
        running = [p for p in m.running() if p.job.crawl == crawlid]
        known = bool(pending or running or crawlid in self.views or m.history.get(crawlid))
        if not known:
            return None
        prevstate = "running" if running or self.alive(crawlid) else ("pending" if pending else None)
        for job in pending:
            m.queue.remove(job.job)
        for process in running:
            m.launcher.cancel(process.job.job, sig)
        ttl = int(m.config.settings.crawl_ttl)
        d = m.in_thread(stop_crawl, m.redis, crawlid, ttl)
        d.addCallbacks(lambda purged: logger.info("stopped fleet crawl %s: %s", crawlid, purged),
                       lambda f: logger.error("could not stop fleet crawl %s: %s", crawlid, f.getErrorMessage()))
        self.views[crawlid] = CrawlView(CrawlState.STOPPED, False)
        return prevstate


def forward_schedule(manager: Any, host: str, params: list[tuple[str, str]]) -> str:
    """``schedule.json`` on another manager of the cluster (its URL from the registry, this manager's credentials);
    the job id it answers, or the reason it refused (blocking)."""
    from manager.webservice import ApiError

    url = ManagerRegistry(manager.redis, manager.config.registry_ttl).url_of(host)
    if url is None:
        raise ApiError(f"no manager registered as {host!r}")
    body = urllib.parse.urlencode(params).encode()
    forward = urllib.request.Request(f"{url}/schedule.json", data=body, method="POST")
    if manager.config.auth:
        token = base64.b64encode(":".join(manager.config.auth).encode()).decode()
        forward.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(forward, timeout=15) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "ok":
        raise ApiError(answer.get("message", "refused"))
    return str(answer["jobid"])

"""The manager's Twisted application (seed 4.3.2): ``crawlfleet manager`` runs :func:`run`.

One manager runs on every worker host. Its projects: ``crawlfleet``, installed with the package (the fleet's rule
spiders; CRAWLFLEET_MANAGER_BUILTIN_PROJECT), and the projects users deploy as eggs, the same on every manager
(:mod:`manager.projects`: eggs in MongoDB, cached on each host). The parts, as scrapyd cuts them: the SQLite pending
queue (:mod:`manager.queue`), the poller (:mod:`manager.poller`, also run every CRAWLFLEET_MANAGER_POLL_INTERVAL
seconds by a ``TimerService``), the launcher (:mod:`manager.launcher`), the job history (:mod:`manager.history`), the
HTTP site: scrapyd's JSON API (:mod:`manager.webservice`), crawlfleet's API (:mod:`manager.api`), the pages
(:mod:`manager.website`, :mod:`manager.project_pages`) — all behind :mod:`manager.security`. A deployed
project's job is a fleet crawl whose workers run on the cluster (:mod:`manager.fleet_crawls`; a timer reads their
states). A second ``TimerService`` heartbeats this manager into the manager registry (:mod:`manager.registry`) from
a thread; a third rewrites the Prometheus ``file_sd`` file of the cluster's /metrics endpoints
(:mod:`messaging.discovery`). :class:`Manager` is what the resources use: schedule, cancel, the job lists, and
blocking calls off the reactor.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from twisted.application.internet import TCPServer, TimerService
from twisted.application.service import MultiService
from twisted.internet import defer, threads
from twisted.web import server

from manager import charts, fleet_crawls, host_fleet
from manager.catalog import SpiderCatalog
from manager.config import PROJECT, ManagerConfig
from manager.flash import Flashes
from manager.fleet_crawls import FleetCrawls
from manager.gateway import KafkaGateway
from manager.history import SqliteJobHistory
from manager.host_fleet import FleetJob
from manager.jobs import InvalidJob, Job, JobRecord
from manager.launcher import Launcher, SpiderProcess
from manager.poller import QueuePoller
from manager.projects import Projects
from manager.queue import SqlitePendingQueue
from manager.registry import ManagerRegistry
from manager.security import safe_log_file
from messaging import clients, discovery, keys
from messaging.clients import as_text
from messaging.health import Beat, Health, redis_answers
from messaging.memory import TrimThread
from messaging.outage import OutageLog
from messaging.reactor import IFleetReactor, running_reactor

logger = logging.getLogger(__name__)
HISTORY_SAMPLE_SECONDS = 15.0  # every manager tries this often; one sample per minute is written
REACTOR_TICK_SECONDS = 1.0  # the reactor's pulse for /livez
T = TypeVar("T")


class Manager:
    """The manager's state and actions (used by every resource)."""

    def __init__(self, config: ManagerConfig, reactor: IFleetReactor | None = None) -> None:
        self.reactor = reactor if reactor is not None else running_reactor()
        self.config = config
        self.project = PROJECT
        self.queue = SqlitePendingQueue(config.dbs_dir / "pending.db")
        self.history = SqliteJobHistory(config.dbs_dir / "jobs.db", config.finished_to_keep)
        self.poller = QueuePoller(self.queue)
        env = {**os.environ, **config.settings.as_env()}
        self.launcher = Launcher(self.poller, self.history, config.logs_dir, config.max_proc, config.project_dir,
                                 config.kill_timeout, env=env, reactor=self.reactor, work_dir=config.work_dir)
        self.catalog = SpiderCatalog(config.project_dir, self.launcher.env, reactor)
        self.projects = Projects(config.settings, self.mongo_db, self.launcher.env, config.work_dir, PROJECT,
                                 self.in_thread)
        self.crawls = FleetCrawls(self)
        self.gateway = KafkaGateway(config.settings)
        self._redis: Any = None
        self._zk: Any = None
        self._mongo: Any = None
        self._mongo_lock = threading.Lock()
        self._site_watch: Any = None
        self.flashes = Flashes()
        self.host = config.node_name or socket.gethostname()
        self.registry_outage = OutageLog(logger, "manager: the registry heartbeat (Redis)")
        self.targets_outage = OutageLog(logger, "manager: writing the Prometheus targets (Redis)")
        self.health = Health().configure(config.settings)  # /livez, /readyz (manager.metrics.ProbeResource)
        self.reactor_beat = self.health.beat("reactor", Beat(resting=False))
        self.health.ready("redis", redis_answers(config.settings))

    # --- blocking work, off the reactor -----------------------------------------------------------------------------
    @property
    def redis(self) -> Any:
        if self._redis is None:
            self._redis = clients.redis_client(self.config.settings, socket_timeout=10)
        return self._redis

    @property
    def zk(self) -> Any:
        """A ZooKeeper client (the console reads the election and edits site rates), opened on first use."""
        if self._zk is None:
            self._zk = clients.zk_client(self.config.settings)
        return self._zk

    @property
    def site_watch(self) -> Any:
        """The sites' rates and blacklist as the workers see them (ZooKeeper watches), started on first use."""
        if self._site_watch is None:
            from frontier.config_watch import SiteConfigWatch
            from messaging.siteconfig import SitePaths

            self._site_watch = SiteConfigWatch(self.zk, SitePaths(self.config.settings.zk_root)).start()
        return self._site_watch

    def mongo_db(self) -> Any:
        with self._mongo_lock:  # first use may come from two threads at once: one client
            if self._mongo is None:
                self._mongo = clients.mongo_client(self.config.settings, serverSelectionTimeoutMS=3000)
        return self._mongo[self.config.settings.mongo_db]

    def in_thread(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> defer.Deferred[T]:
        return threads.deferToThread(function, *args, **kwargs)

    # --- jobs ---------------------------------------------------------------------------------------------------
    def known(self, job_id: str) -> bool:
        return (self.queue.get(job_id) is not None or self.launcher.find(job_id) is not None
                or self.history.get(job_id) is not None)

    # --- projects -----------------------------------------------------------------------------------------------
    @property
    def builtin(self) -> bool:
        """Whether the installed project is served (CRAWLFLEET_MANAGER_BUILTIN_PROJECT)."""
        return self.config.builtin_project

    def project_names(self) -> defer.Deferred[list[str]]:
        """``listprojects.json``: the installed project first (when served), then the deployed ones."""
        installed = [self.project] if self.builtin else []
        return self.projects.names().addCallback(lambda deployed: installed + deployed)

    def has_project(self, project: str) -> defer.Deferred[bool]:
        """A project this manager answers for: the installed one, a deployed one, or one it has jobs of (a job of a
        project deleted since stays visible and can be cancelled)."""
        if project == self.project:
            return defer.succeed(self.builtin)
        known: list[Job | JobRecord] = [*self.pending(), *(p.job for p in self.running()), *self.finished()]
        if any(j.project == project for j in known):
            return defer.succeed(True)
        return self.projects.exists(project)

    # --- jobs ---------------------------------------------------------------------------------------------------
    def schedule(self, job: Job, workers: int | None = None, hosts: list[str] | None = None) -> defer.Deferred[str]:
        """Queue a job after checking its spider exists; fires with the job id (InvalidJob: the reason). A deployed
        project's job pins its version (``job.version``, default the latest) and that version's egg digest, and is a
        fleet crawl of ``workers`` workers on ``hosts`` (:mod:`manager.fleet_crawls`); with ``job.crawl`` it is one
        more worker of that crawl."""
        if job.project == self.project and self.builtin:
            if job.version is not None:
                return defer.fail(InvalidJob(f"version '{job.version}' not found: the {self.project} project is "
                                             "installed, not deployed as eggs"))
            return self.catalog.get().addCallback(self._queue, job)
        d = self.has_project(job.project) if job.project != self.project else defer.succeed(False)

        def resolve(exists: bool) -> Any:
            if not exists:
                raise InvalidJob(f"project '{job.project}' not found")
            if job.crawl:
                return self.crawls.join(job)
            return self.projects.resolve(job.project, job.version).addCallback(pin)

        def pin(info: Any) -> Any:
            job.version, job.egg_sha256 = info.version, info.sha256
            return self.projects.spiders(info).addCallback(begin)

        def begin(spiders: list[str]) -> Any:
            if job.spider not in spiders:
                raise InvalidJob(f"spider '{job.spider}' not found")
            count = workers if workers is not None else int(self.config.settings.manager_workers)
            return self.crawls.begin(job, count, hosts or [])

        return d.addCallback(resolve)

    def _queue(self, spiders: list[str], job: Job) -> str:
        if job.spider not in spiders:
            raise InvalidJob(f"spider '{job.spider}' not found")
        if self.known(job.job):
            raise InvalidJob(f"jobid '{job.job}' is already used (a job id is never reused)")
        return self.enqueue(job)

    def enqueue(self, job: Job) -> str:
        """Queue a checked job for a process slot."""
        self.queue.add(job)
        logger.info("scheduled %s %s %s%s (priority %g)", job.project, job.spider, job.job,
                    f" version {job.version}" if job.deployed else "", job.priority)
        self.reactor.callLater(0, self.poller.poll)
        return job.job

    def cancel(self, job_id: str, sig: int = signal.SIGTERM, project: str | None = None) -> str | None:
        """scrapyd's prevstate: ``pending`` (removed from the queue), ``running`` (being stopped) or None; with
        ``project``, only a job of that project."""
        pending, running = self.queue.get(job_id), self.launcher.find(job_id)
        record = self.history.get(job_id)
        of_crawl = next((j for j in (pending, running.job if running else None, record) if j is not None), None)
        if of_crawl is not None and of_crawl.crawl == job_id and project in (None, of_crawl.project):
            return self.crawls.cancel(job_id, sig)  # a fleet crawl's job: the crawl stops on every host
        if pending is not None and project in (None, pending.project) and self.queue.remove(job_id):
            logger.info("cancelled pending %s", job_id)
            return "pending"
        if running is not None and project in (None, running.job.project) and self.launcher.cancel(job_id, sig):
            return "running"
        return None

    def state_of(self, job_id: str, project: str | None = None) -> str | None:
        running, pending, finished = self.launcher.find(job_id), self.queue.get(job_id), self.history.get(job_id)
        if running is not None and project in (None, running.job.project):
            return "running"
        if project in (None, self.project) and any(j.job == job_id for j in self.fleet_jobs()):
            return "running"  # a worker of this host's fleet (crawlfleet up)
        if pending is not None and project in (None, pending.project):
            return "pending"
        if finished is not None and project in (None, finished.project):
            return "running" if self.crawl_runs(finished) else "finished"
        return None

    def crawl_runs(self, record: JobRecord) -> bool:
        """Whether a finished process's job is a fleet crawl that still runs (its first worker ended, others go on)."""
        return bool(record.crawl) and record.job == record.crawl and self.crawls.alive(record.crawl)

    def pending(self) -> list[Job]:
        return self.queue.list()

    def running(self) -> list[SpiderProcess]:
        return sorted(self.launcher.processes.values(), key=lambda p: p.record.start_time)

    def finished(self) -> list[JobRecord]:
        return self.history.list()

    def log_url(self, project: str, spider: str, job: str) -> str:
        return f"/logs/{project}/{spider}/{job}.log"

    def items_url(self, project: str, spider: str, job: str) -> str | None:
        """The job's items (``/items/``: the installed project's jobs store theirs in MongoDB; None for others)."""
        return f"/items/{project}/{spider}/{job}.jl" if project == self.project else None

    # --- this host's `crawlfleet up` workers (manager.host_fleet) -------------------------------------------------
    def fleet_jobs(self, alive_only: bool = True) -> list[FleetJob]:
        own = {p.job.job for p in self.launcher.processes.values()}
        return [j for j in host_fleet.fleet_jobs(self.config.settings.run_dir, alive_only) if j.job not in own]

    def job_log(self, project: str, spider: str, job: str) -> Path | None:
        """The log of a job of this host: one this manager ran, or a worker of this host's fleet."""
        own = safe_log_file(self.config.logs_dir, [project, spider, f"{job}.log"])
        if own is not None or project != self.project:
            return own
        return host_fleet.fleet_log(self.config.settings.run_dir, job, spider)

    def job_logs(self) -> list[tuple[str, str, str, Path]]:
        """(project, spider, job, log) of every log this manager serves."""
        found = {(p.parent.parent.name, p.parent.name, p.name.removesuffix(".log")): p
                 for p in Path(self.config.logs_dir).glob("*/*/*.log")}
        for job in self.fleet_jobs(alive_only=False):
            found.setdefault((self.project, job.spider, job.job), Path(job.log_path))
        return [(*key, path) for key, path in sorted(found.items()) if path.is_file()]

    def live_worker(self, job: str) -> dict[str, Any] | None:
        """A running worker's registration (pages, items, CPU, memory), or None; blocking (Redis)."""
        try:
            if self.redis.zscore(keys.WORKERS, job) is None:
                return None
            return {as_text(k): as_text(v) for k, v in self.redis.hgetall(keys.worker(job)).items()}
        except Exception as exc:  # Redis away: the log's own figures
            logger.debug("registry unreadable for %s: %s", job, exc)
            return None

    # --- registry -----------------------------------------------------------------------------------------------
    def heartbeat(self) -> defer.Deferred[None]:
        config = self.config
        running, pending = len(self.launcher.processes), self.queue.count()

        def beat() -> None:
            ManagerRegistry(self.redis, config.registry_ttl).heartbeat(
                self.host, config.url, config.node_name, config.max_proc, running, pending)

        d = self.in_thread(beat)
        d.addCallbacks(lambda _: self.registry_outage.ok(), lambda f: self.registry_outage.failed(f.value))
        d.addCallback(lambda _: None)
        return d

    def sample_history(self) -> defer.Deferred[Any]:
        """This minute's sample of the Stats charts (:mod:`manager.charts`), unless another manager took it."""
        s = self.config.settings
        d = self.in_thread(charts.sample, self.redis, s.weight_window_minutes, s.heartbeat_ttl)
        d.addErrback(lambda f: logger.warning("chart history sample failed: %s", f.getErrorMessage()))
        return d

    def write_targets(self) -> defer.Deferred[Any]:
        """Rewrite the Prometheus file_sd file of the cluster's /metrics endpoints (:mod:`messaging.discovery`)."""
        d = self.in_thread(discovery.refresh, self.redis, self.config.settings)
        d.addCallbacks(lambda _: self.targets_outage.ok(), lambda f: self.targets_outage.failed(f.value))
        return d

    def leave(self) -> None:
        try:
            ManagerRegistry(self.redis, self.config.registry_ttl).leave(self.host)
        except Exception as exc:  # Redis away at shutdown: the entry expires with its TTL
            logger.warning("could not leave the manager registry: %s", exc)

    def close(self) -> None:
        self.gateway.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        if self._mongo is not None:
            self._mongo.close()
        self.queue.close()
        self.history.close()


class _Lifecycle(MultiService):
    def __init__(self, manager: Manager) -> None:
        super().__init__()
        self.manager = manager

    def stopService(self) -> defer.Deferred[Any]:
        d = defer.maybeDeferred(super().stopService)
        d.addBoth(lambda _: self.manager.in_thread(self.manager.leave))
        d.addBoth(lambda _: self.manager.close())
        return d


def application(config: ManagerConfig, reactor: IFleetReactor | None = None) -> tuple[MultiService, Manager,
                                                                                     server.Site]:
    """The services (launcher, poll timer, heartbeat timer, HTTP server), the manager and its site."""
    from manager.website import build_site

    manager = Manager(config, reactor)
    site = build_site(manager)
    services = _Lifecycle(manager)
    manager.launcher.setServiceParent(services)
    TimerService(config.poll_interval, manager.poller.poll).setServiceParent(services)
    TimerService(config.heartbeat_interval, manager.heartbeat).setServiceParent(services)
    TimerService(HISTORY_SAMPLE_SECONDS, manager.sample_history).setServiceParent(services)
    TimerService(REACTOR_TICK_SECONDS, manager.reactor_beat.tick).setServiceParent(services)
    TimerService(fleet_crawls.REFRESH_SECONDS, manager.crawls.refresh).setServiceParent(services)
    if discovery.sd_file(config.settings) is not None:
        TimerService(config.settings.prometheus_sd_interval, manager.write_targets).setServiceParent(services)
    TCPServer(config.port, site, interface=config.bind).setServiceParent(services)
    return services, manager, site


def run(config: ManagerConfig) -> None:
    """Serve until SIGTERM/SIGINT; then stop the spiders (SIGTERM, SIGKILL after the timeout) and leave."""
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    reactor = running_reactor()

    globalLogBeginner.beginLoggingTo([STDLibLogObserver()], redirectStandardIO=False)
    services, manager, _ = application(config, reactor)
    services.startService()
    reactor.addSystemEventTrigger("before", "shutdown", services.stopService)
    trim = TrimThread(config.settings.malloc_trim_interval).start()  # freed memory back to the system (issue 40)
    reactor.addSystemEventTrigger("before", "shutdown", trim.stop)
    logger.info("manager %s listening on http://%s:%d/ (%s authentication), %d process slots, logs in %s",
                manager.host, config.bind, config.port, "basic" if config.auth else "no", config.max_proc,
                config.logs_dir)
    reactor.run()

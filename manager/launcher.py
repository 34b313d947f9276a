"""The launcher: at most ``max_proc`` spider processes, each started with ``spawnProcess`` and an argument list.

Like scrapyd's, it keeps one waiting :meth:`~manager.poller.QueuePoller.next` per free slot; a job that arrives is
spawned as ``python -m scrapy crawl <spider> -s CRAWLFLEET_JOB=<job> …`` (:meth:`manager.jobs.Job.crawl_args`,
never a shell) in CRAWLFLEET_MANAGER_PROJECT_DIR; a deployed project's job as ``python -m spiders.runner --project
<p> --version <v> --sha256 <d> crawl …`` (scrapyd's runner: its pinned egg from the host's cache, activated) in
``$CRAWLFLEET_RUN_DIR/manager/projects/<p>``, without the installed project's SCRAPY_SETTINGS_MODULE.
:class:`SpiderProcess` records project, spider, job, pid, start and end time, exit status and log path (seed table
4-12) and writes the child's stdout and stderr to ``<logs>/<project>/<spider>/<job>.log`` itself, so a spider that
dies before Scrapy's logging starts still leaves its traceback there.

Stopping (``cancel.json``, the *Jobs* page, the manager's own shutdown) sends SIGTERM: a fleet worker then finishes
what it downloads, commits, leaves the registry and hands its remaining tasks back to ``seeds``. A process still
alive CRAWLFLEET_MANAGER_KILL_TIMEOUT seconds later gets SIGKILL (its leases then return when its heartbeat
expires). Finished runs go to the bounded history.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.application.service import Service
from twisted.internet import defer, error, protocol
from twisted.internet.interfaces import IDelayedCall, IProcessTransport, IReactorTime
from twisted.python.failure import Failure
from zope.interface import implementer

from manager.history import SqliteJobHistory
from manager.interfaces import ILauncher
from manager.jobs import Job, JobRecord
from manager.poller import QueuePoller
from messaging.reactor import IFleetReactor, running_reactor

logger = logging.getLogger(__name__)


def log_path(logs_dir: Path, project: str, spider: str, job: str) -> Path:
    return logs_dir / project / spider / f"{job}.log"


class SpiderProcess(protocol.ProcessProtocol):
    """One running job; ``deferred`` fires with its :class:`JobRecord` when the process has ended."""

    transport: IProcessTransport  # spawnProcess sets it before connectionMade (Twisted's None is for before)

    def __init__(self, job: Job, log_file: Path, clock: IReactorTime) -> None:
        self.job = job
        self.clock = clock
        self.record = JobRecord(job.project, job.spider, job.job, None, time.time(), log_path=str(log_file),
                                crawl=job.crawl)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_file.open("ab")
        self.deferred: defer.Deferred[JobRecord] = defer.Deferred()
        self._kill_call: IDelayedCall | None = None

    @property
    def pid(self) -> int | None:
        return self.record.pid

    def connectionMade(self) -> None:
        self.record.pid = self.transport.pid
        self.transport.closeStdin()
        logger.info("started %s %s (pid %s)", self.job.spider, self.job.job, self.record.pid)

    def outReceived(self, data: bytes) -> None:
        self._log.write(data)
        self._log.flush()

    errReceived = outReceived

    def stop(self, timeout: float, sig: int = signal.SIGTERM) -> None:
        """Ask the process to end; SIGKILL after ``timeout`` seconds if it has not."""
        self.record.cancelled = True
        self._signal(sig)
        if self._kill_call is None:
            self._kill_call = self.clock.callLater(timeout, self._signal, signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        try:
            self.transport.signalProcess(sig)
        except error.ProcessExitedAlready:
            pass

    def processEnded(self, reason: Failure) -> None:
        self.record.end_time = time.time()
        value = reason.value
        if isinstance(value, error.ProcessTerminated):
            self.record.exit_status = value.exitCode if value.exitCode is not None else -(value.signal or 0)
        else:
            self.record.exit_status = 0
        if self._kill_call is not None and self._kill_call.active():
            self._kill_call.cancel()
        self._log.close()
        logger.info("ended %s %s (pid %s): exit status %s", self.job.spider, self.job.job, self.record.pid,
                    self.record.exit_status)
        self.deferred.callback(self.record)


@implementer(ILauncher)
class Launcher(Service):
    name = "launcher"

    def __init__(self, poller: QueuePoller, history: SqliteJobHistory, logs_dir: Path, max_proc: int,
                 project_dir: Path, kill_timeout: float, env: dict[str, str] | None = None,
                 reactor: IFleetReactor | None = None, on_change: Callable[[], None] | None = None,
                 work_dir: Path | None = None) -> None:
        self.reactor = reactor if reactor is not None else running_reactor()
        self.poller = poller
        self.history = history
        self.logs_dir = logs_dir
        self.max_proc = max_proc
        self.project_dir = project_dir
        self.work_dir = work_dir if work_dir is not None else project_dir
        self.kill_timeout = kill_timeout
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("SCRAPY_SETTINGS_MODULE", "spiders.settings")
        self.env["PYTHONIOENCODING"] = "UTF-8"
        # up to max_proc spiders share this host: their page-work pools (CRAWLFLEET_PAGE_PROCESSES=-1) count so
        self.env.setdefault("CRAWLFLEET_HOST_WORKERS", str(max_proc))
        self.processes: dict[int, SpiderProcess] = {}
        self.on_change = on_change or (lambda: None)
        self._stopping = False

    def startService(self) -> None:
        super().startService()
        logger.info("launcher: up to %d spider processes", self.max_proc)
        for slot in range(self.max_proc):
            self._wait(slot)

    def _wait(self, slot: int) -> None:
        if not self._stopping:
            self.poller.next().addCallback(self._spawn, slot)

    def _spawn(self, job: Job, slot: int) -> None:
        if self._stopping:  # taken while the manager shuts down: it waits for the next start
            self.poller.queue.add(job)
            return
        process = SpiderProcess(job, log_path(self.logs_dir, job.project, job.spider, job.job), self.reactor)
        process.deferred.addCallback(self._ended, slot)
        argv = job.crawl_args(sys.executable)
        self.processes[slot] = process
        try:
            env, cwd = self.environment(job)
            self.reactor.spawnProcess(process, sys.executable, args=argv, env=env, path=str(cwd))
        except OSError as exc:
            logger.error("could not start %s: %s", job.job, exc)
            process.processEnded(Failure(error.ProcessTerminated(exitCode=127)))
        self.on_change()

    def environment(self, job: Job) -> tuple[dict[str, str], Path]:
        """The job's environment and working directory: the installed project's, or for a deployed project's job
        ``<work dir>/<project>`` (where its relative paths, FEEDS files or HTTPCACHE_DIR, land) and no
        SCRAPY_SETTINGS_MODULE (its runner takes the egg's)."""
        if not job.deployed:
            return self.env, self.project_dir
        cwd = self.work_dir / job.project
        cwd.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in self.env.items() if k != "SCRAPY_SETTINGS_MODULE"}
        return {**env, "SCRAPY_PROJECT": job.project}, cwd

    def _ended(self, record: JobRecord, slot: int) -> JobRecord:
        self.processes.pop(slot, None)
        self.history.add(record)
        self.on_change()
        self._wait(slot)
        self.reactor.callLater(0, self.poller.poll)
        return record

    def find(self, job_id: str) -> SpiderProcess | None:
        return next((p for p in self.processes.values() if p.job.job == job_id), None)

    def cancel(self, job_id: str, sig: int = signal.SIGTERM) -> bool:
        process = self.find(job_id)
        if process is None:
            return False
        logger.info("stopping %s (pid %s) with signal %d", job_id, process.pid, sig)
        process.stop(self.kill_timeout, sig)
        return True

    def stopService(self) -> defer.Deferred[Any]:
        """The manager stops: its spiders are stopped too (SIGTERM, SIGKILL after the timeout), pending jobs stay."""
        self._stopping = True
        running = list(self.processes.values())
        for process in running:
            process.stop(self.kill_timeout)
        super().stopService()
        return defer.DeferredList([p.deferred for p in running], consumeErrors=True)

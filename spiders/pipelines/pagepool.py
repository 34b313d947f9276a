"""The page-work pool, on the reactor: processes of ``python -m spiders.pipelines.pageproc`` (see that module for
why they are programs of their own) talked to through pipes by the reactor itself.

No thread and no executor: a batch is pickled and written to a process's stdin by the reactor, its answer read from
the process's stdout by the reactor (Twisted spawns with ``posix_spawnp``, safe in a threaded process). A batch
goes to the process with the fewest pages in hand.

Nothing is lost when a process dies (killed, out of memory, a crash in a C library): the batches it had in hand
are processed right away in the reactor, as they would be without a pool, with one warning line saying so, and a
new process takes its place (up to :data:`MAX_RESTARTS` times; after that, and whenever no process is left, page
work runs in the reactor). A page that killed its process is therefore never sent to another one.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import pickle
import sys
from collections import deque
from pathlib import Path
from typing import Any

from twisted.internet import error, main, protocol
from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.interfaces import IProcessTransport
from twisted.python.failure import Failure

from messaging.reactor import IFleetReactor, running_reactor
from spiders.pipelines.pageproc import HEADER, Page, frame, page_work_batch

logger = logging.getLogger(__name__)

MAX_RESTARTS = 20  # processes started in place of dead ones before the pool gives up (page work in the reactor)
PIPE_BYTES = 1 << 20  # pipe buffers this big (Linux, within fs.pipe-max-size) hold a batch or an answer whole
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def process_argv() -> list[str]:
    return [sys.executable, "-m", "spiders.pipelines.pageproc"]


def process_env() -> dict[str, str]:
    """This environment, with the project importable from wherever the worker was started."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PROJECT_ROOT, env.get("PYTHONPATH", "")]))
    return env


class PageProcess(protocol.ProcessProtocol):
    """One process of the pool: its jobs in hand, in the order it answers them."""

    transport: IProcessTransport  # spawnProcess sets it before connectionMade (Twisted's None is for before)

    def __init__(self, pool: PagePool) -> None:
        self.pool = pool
        self.jobs: deque[tuple[list[Page], Deferred]] = deque()
        self.ready: Deferred = Deferred()
        self.is_ready = False
        self.gone = False
        self.pid: int | None = None
        self._buffer = bytearray()

    @property
    def pages_in_hand(self) -> int:
        return sum(len(pages) for pages, _ in self.jobs)

    def connectionMade(self) -> None:
        self.pid = self.transport.pid
        widen_pipes(self.transport)

    def send(self, pages: list[Page]) -> Deferred:
        done: Deferred = Deferred()
        self.jobs.append((pages, done))
        self.transport.write(frame(pages))
        return done

    def outReceived(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer)
            end = HEADER.size + size
            if len(buffer) < end:
                break
            message = pickle.loads(memoryview(buffer)[HEADER.size:end])
            del buffer[:end]
            self._answer(message)

    def _answer(self, message: Any) -> None:
        if not self.is_ready:
            self.is_ready = True
            self.ready.callback(message.get("pid"))
            return
        _, done = self.jobs.popleft()
        done.callback(message)

    def outConnectionLost(self) -> None:
        self._gone("its output closed")

    def processEnded(self, reason: Failure) -> None:
        self._gone(reason.getErrorMessage())

    def _gone(self, why: str) -> None:
        if not self.gone:
            self.gone = True
            self.pool._lost(self, why)

    def kill(self) -> None:
        try:
            self.transport.signalProcess("KILL")
        except error.ProcessExitedAlready:
            pass


def widen_pipes(transport: Any) -> None:
    """Let a process write its whole answer at once and the reactor read it at once.

    With a pipe's 64 KiB and Twisted's 8 KiB reads an answer (tens of KiB a page) took a dozen turns of the reactor
    to drain, and the process waited, blocked in its write, before it could start on the next batch: the pool's
    pace would follow the reactor's. So the pipes are widened to :data:`PIPE_BYTES` where the system allows, and
    the answers' pipe is read in reads of that size."""
    for pipe in transport.pipes.values():
        try:
            fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
        except OSError:
            pass  # not Linux, or above fs.pipe-max-size: the default size works, a little slower
    reader = transport.pipes.get(1)
    if reader is None:
        return

    def do_read() -> Any:
        try:
            data = os.read(reader.fd, PIPE_BYTES)
        except OSError as exc:
            return None if exc.errno in (errno.EAGAIN, errno.EINTR) else main.CONNECTION_LOST
        if not data:
            return main.CONNECTION_DONE
        reader.dataReceived(data)
        return None

    reader.doRead = do_read


class PagePool:
    """``processes`` page-work processes driven by ``reactor`` (the running one by default)."""

    def __init__(self, processes: int, reactor: IFleetReactor | None = None, argv: list[str] | None = None,
                 max_restarts: int = MAX_RESTARTS) -> None:
        self.reactor = reactor if reactor is not None else running_reactor()
        self.size = processes
        self.argv = argv or process_argv()
        self.restarts_left = max_restarts
        self.processes: list[PageProcess] = []
        self.closing = False
        self.in_reactor = 0  # pages processed in the reactor because their process died (or none was left)
        self._ended: dict[PageProcess, Deferred] = {}

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]

    @property
    def pages_in_hand(self) -> int:
        return sum(process.pages_in_hand for process in self.processes)

    def start(self, timeout: float = 120.0) -> Deferred:
        """Start the processes; fires (with their pids) once each has imported the extraction. One that is not
        ready within ``timeout`` seconds is killed (and replaced; its pages, if any, are processed in the reactor)."""
        starting = [self._spawn() for _ in range(self.size)]

        def slow() -> None:
            for process in starting:
                if not process.is_ready and not process.gone:
                    logger.warning("page-work process %s did not start within %g s: killed", process.pid, timeout)
                    process.kill()

        timer = self.reactor.callLater(timeout, slow)

        def started(results: list[tuple[bool, Any]]) -> list[int]:
            if timer.active():
                timer.cancel()
            return [pid for ok, pid in results if ok]

        return DeferredList([process.ready for process in starting], consumeErrors=True).addCallback(started)

    def _spawn(self) -> PageProcess:
        process = PageProcess(self)
        self._ended[process] = Deferred()
        self.reactor.spawnProcess(process, self.argv[0], self.argv, env=process_env(),
                                  childFDs={0: "w", 1: "r", 2: 2})
        self.processes.append(process)
        return process

    def submit(self, pages: list[Page]) -> Deferred:
        """Page work of ``pages``: a Deferred of their results, in order."""
        if not self.processes:
            return succeed(self._in_reactor(pages))
        process = min(self.processes, key=lambda p: p.pages_in_hand)
        return process.send(pages)

    def _in_reactor(self, pages: list[Page]) -> list[dict[str, Any]]:
        self.in_reactor += len(pages)
        return page_work_batch(pages)

    def _lost(self, process: PageProcess, why: str) -> None:
        self.processes.remove(process)
        if not process.ready.called:
            process.ready.errback(Failure(RuntimeError(f"page-work process {process.pid} ended: {why}")))
        jobs, process.jobs = process.jobs, deque()
        pages = sum(len(job_pages) for job_pages, _ in jobs)
        if not self.closing:
            replaced = self.restarts_left > 0
            self.restarts_left -= replaced
            logger.warning("page-work process %s died (%s) with %d page(s) in hand: they are processed in the "
                           "reactor; %s", process.pid, why, pages,
                           "a new process takes its place" if replaced else
                           "no new process (too many died): page work goes on in the reactor" if not self.processes
                           else "no new process (too many died)")
            if replaced:
                self._spawn()
        elif pages:
            logger.warning("page-work process %s ended (%s) with %d page(s) in hand: they are processed in the "
                           "reactor", process.pid, why, pages)
        for job_pages, done in jobs:
            done.callback(self._in_reactor(job_pages))
        self._ended.pop(process).callback(None)

    def close(self, timeout: float = 30.0) -> Deferred:
        """Close every process's stdin (it ends once its batches are answered); kill what is left after
        ``timeout`` seconds. Fires when all are gone."""
        self.closing = True
        for process in list(self.processes):
            process.transport.closeStdin()
        ended = list(self._ended.values())
        killer = self.reactor.callLater(timeout, self._kill_all)

        def done(result: Any) -> Any:
            if killer.active():
                killer.cancel()
            return result

        return DeferredList(ended).addBoth(done)

    def _kill_all(self) -> None:
        for process in list(self.processes):
            process.kill()

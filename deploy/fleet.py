"""The local fleet: every crawlfleet process of one host, started under the run directory and stopped by PID.

``up`` brings up, in this order and each only when it is not running yet: the services (``deploy.services``), the
demo web (optional), the masters (``crawlfleet master --id m1``, …; one leads, the others stand by), one Kafka
monitor, one Redis monitor and the workers (``crawlfleet worker --spider list|universal --job <host>-list-1``).
Every process is a child in its own process group (``deploy.procs.spawn``), logs to ``<run_dir>/logs/<name>.log``
and is recorded in the state file under ``fleet`` (name, role, argv, pid, log), so that ``down`` finds it again
from any shell: workers first (SIGTERM: they hand their leases back), then masters and monitors, then the demo web
and the services, each SIGTERM, a bounded wait, SIGKILL.

Idempotent: ``up`` on a recorded fleet starts nothing new; it only respawns the processes that died (a worker with
a new job id: a dead job id is retired for good, ``frontier.registry``), and restarts them all when the services
they point at moved (a service restarted on another port). A Redis server that died is restarted first on its own
port and data directory, so the fleet's clients reconnect to it by themselves.

Children get the local services' addresses pinned in their environment (``CRAWLFLEET_REDIS_URL``, … from the state
file), whatever the caller's environment says: the fleet belongs to this run directory.

Persistence: Redis runs with an append-only file (fsync every second) when ``FleetSpec.redis_aof`` (``crawlfleet
up``): accepted requests, queues and leases survive a Redis restart, but for at most the last second. MongoDB keeps
its data on disk under ``<run_dir>/mongo/data`` (``FleetSpec.mongo_on_disk``): stored items survive its restart.
The demo runs both in memory (nothing survives); Kafka (Tansu, memory) keeps nothing across a restart.

Supervision (``FleetSpec.supervise``): the fleet's last process is ``crawlfleet supervise`` (:mod:`deploy.supervisor`),
which restarts in place a service that stays unhealthy (checked through a write) past a bound, starts a process that
died again, and replaces a worker the master retired (hung, stopped) — with back-off, saying why in its log — and
keeps the Prometheus ``file_sd`` file of every /metrics endpoint current (:mod:`messaging.discovery`; ``up`` writes
it first). Its masters run with ``--keep-supervisor`` and start the supervisor again when it dies or hangs
(:mod:`deploy.keeper`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deploy import services as local_services
from deploy.demoweb import DEFAULT_PAGES, demoweb_status, start_demoweb, stop_demoweb
from deploy.procs import kill_hard, log_tail, pid_alive, port_free, spawn, stop_pid, wait_for
from deploy.services.redis import RedisService
from deploy.state import locked, modify_state
from messaging import clients, discovery, keys, spider_types
from messaging.identity import node_name
from messaging.settings import SETTINGS, load, read_state

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SPIDER_TYPES = spider_types.NAMES
# Roles in the order ``down`` stops them: workers first, so that they can still hand their leases back.
# The supervisor goes first of all: it must not restart what is being stopped.
STOP_ORDER = ("supervisor", "worker", "master", "redis-monitor", "kafka-monitor")
WORKER_STOP_SECONDS = 30.0  # a worker flushes its items and returns its leases before it exits
STOP_SECONDS = 10.0


class FleetError(RuntimeError):
    """A fleet process did not start; the message names it and its log."""


@dataclass(frozen=True)
class FleetSpec:
    # workers per spider type (messaging.spider_types; a type left out gets none)
    workers: Mapping[str, int] = field(default_factory=spider_types.default_workers)
    masters: int = 2
    demoweb: bool = True
    pages: int = DEFAULT_PAGES  # articles per demo site
    redis_aof: bool = True
    mongo_on_disk: bool = True  # MongoDB's data under <run_dir>/mongo/data (the demo runs it in memory)
    supervise: bool = True  # a supervisor restarts what stays unhealthy and replaces dead or fenced workers
    owner: str = "up"  # who started it ("up", "demo"): the demo stops only a fleet it started
    timeout: float = 90.0  # seconds for everything to be ready


@dataclass
class FleetProcess:
    """One recorded process of the fleet."""

    name: str
    role: str
    argv: list[str]
    pid: int = 0
    log: str = ""
    ready: str = ""  # what its log says once it runs
    job: str | None = None
    spider: str | None = None
    started: float = 0.0  # when it was spawned (the manager's Jobs page shows a fleet worker's start)
    log_offset: int = field(default=0, repr=False)  # where this start's lines begin (logs are appended to)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("log_offset")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FleetProcess:
        known = {name for name in cls.__dataclass_fields__ if name != "log_offset"}
        return cls(**{key: value for key, value in data.items() if key in known})

    @property
    def alive(self) -> bool:
        return bool(self.pid) and pid_alive(self.pid)


def job_id(host: str, spider: str, number: int) -> str:
    """``<host>-<spider>-<n>``, with the host name cut down to what a job id may hold."""
    safe = re.sub(r"[^A-Za-z0-9._@-]+", "-", host.split(".")[0]).strip("-._@") or "host"
    return f"{safe}-{spider}-{number}"


def cli_argv(*args: str) -> list[str]:
    """``crawlfleet <args>`` with this interpreter (the venv's), from the project root."""
    return [sys.executable, "-m", "deploy.cli", *args]


def master_process(number: int, keep_supervisor: bool = False) -> FleetProcess:
    """A master; ``keep_supervisor``: it also keeps the fleet's supervisor running (``deploy.keeper``)."""
    identifier = f"m{number}"
    keep = ["--keep-supervisor"] if keep_supervisor else []
    return FleetProcess(f"master-{identifier}", "master", cli_argv("master", "--id", identifier, *keep),
                        ready=f"master {identifier}: running")


def monitor_processes() -> list[FleetProcess]:
    return [FleetProcess("kafka-monitor", "kafka-monitor", cli_argv("kafka-monitor"), ready="kafka-monitor: consuming"),
            FleetProcess("redis-monitor", "redis-monitor", cli_argv("redis-monitor"), ready="redis-monitor: watching")]


def worker_process(job: str, spider: str) -> FleetProcess:
    return FleetProcess(f"worker-{job}", "worker", cli_argv("worker", "--spider", spider, "--job", job),
                        ready=f"worker {job} ready", job=job, spider=spider)


def supervisor_process() -> FleetProcess:
    return FleetProcess("supervisor", "supervisor", cli_argv("supervise"), ready="supervisor: watching")


def plan(spec: FleetSpec, host: str, next_numbers: Mapping[str, int]) -> list[FleetProcess]:
    """The processes of a new fleet, in start order; worker numbers continue from ``next_numbers`` (per spider)."""
    processes = [master_process(n, spec.supervise) for n in range(1, spec.masters + 1)] + monitor_processes()
    for spider in SPIDER_TYPES:
        first = next_numbers.get(spider, 1)
        count = spec.workers.get(spider, 0)
        processes += [worker_process(job_id(host, spider, n), spider) for n in range(first, first + count)]
    if spec.supervise:
        processes.append(supervisor_process())
    return processes


def mongo_storage(run_dir: Path, spec: FleetSpec) -> str | None:
    """Where MongoDB keeps its data: on disk under the run directory for `crawlfleet up`, in memory for the demo."""
    return str(run_dir / "mongo" / "data") if spec.mongo_on_disk else None


# --- up ----------------------------------------------------------------------------------------------------------
def up(run_dir: str | os.PathLike[str], spec: FleetSpec | None = None) -> dict[str, Any]:
    """Start what is missing (see the module docstring); returns :func:`status` plus ``started`` (process names)."""
    spec = spec or FleetSpec()
    run_dir = Path(run_dir).resolve()
    with locked(run_dir, "fleet"):
        restart_redis_in_place(run_dir, spec.timeout)
        local_services.up(run_dir, local_services.Options(redis_aof=spec.redis_aof, timeout=spec.timeout,
                                                          mongo_storage=mongo_storage(run_dir, spec)))
        if spec.demoweb and not demoweb_status(run_dir)["running"]:
            stop_demoweb(run_dir)  # a stale record, if any
            start_demoweb(run_dir, pages=spec.pages)
        state = read_state(run_dir)
        env = child_env(run_dir, state)
        record = state.get("fleet")
        started = _reconcile(run_dir, record, env, spec.timeout) if record else _start_new(run_dir, spec, env)
    result = status(run_dir)
    result["started"] = started
    result["targets_file"] = write_targets(env)
    return result


def write_targets(env: Mapping[str, str]) -> str | None:
    """The Prometheus file_sd file of the cluster's endpoints, written now (the supervisor keeps it current)."""
    settings = load(env)
    redis = clients.redis_client(settings, socket_timeout=5)
    try:
        path = discovery.refresh(redis, settings)
    except Exception as exc:  # Redis away right after up: the supervisor writes it at its next check
        logging.getLogger(__name__).warning("could not write the Prometheus targets yet: %s", exc)
        return str(discovery.sd_file(settings) or "") or None
    finally:
        redis.close()
    return str(path) if path is not None else None


def _start_new(run_dir: Path, spec: FleetSpec, env: dict[str, str]) -> list[str]:
    numbers = read_state(run_dir).get("fleet_jobs", {})
    processes = plan(spec, node_name(load(env)), {spider: numbers.get(spider, 0) + 1 for spider in SPIDER_TYPES})
    record: dict[str, Any] = {"owner": spec.owner, "redis_aof": spec.redis_aof, "started": time.time(),
                              "connection": _connection(env), "processes": []}

    def remember(state: dict[str, Any]) -> None:
        state["fleet"] = record
        jobs = state.setdefault("fleet_jobs", {})
        for process in processes:
            if process.role == "worker" and process.job:
                number = int(process.job.rsplit("-", 1)[1])
                jobs[process.spider] = max(jobs.get(process.spider, 0), number)

    modify_state(run_dir, remember)  # job numbers are taken before anything starts: a job id is never reused
    env = with_host_workers(env, processes)
    for process in processes:
        _spawn(run_dir, process, env)
        record["processes"].append(process.to_dict())
        modify_state(run_dir, lambda state: state.__setitem__("fleet", record))  # recorded as soon as it runs
    _await_ready(processes, env, spec.timeout)
    return [process.name for process in processes]


def _reconcile(run_dir: Path, record: dict[str, Any], env: dict[str, str], timeout: float) -> list[str]:
    """Respawn the dead processes of a recorded fleet (all of them when the services moved)."""
    processes = [FleetProcess.from_dict(data) for data in record["processes"]]
    moved = record.get("connection") != _connection(env)
    env = with_host_workers(env, processes)
    if moved:
        _stop_all(processes)
    respawned: list[FleetProcess] = []
    for index, process in enumerate(processes):
        if process.alive and not moved:
            continue
        if process.role == "worker":
            process = worker_process(_next_job(run_dir, process.spider or "list"), process.spider or "list")
        _spawn(run_dir, process, env)
        processes[index] = process
        respawned.append(process)
    if respawned:
        record = {**record, "connection": _connection(env), "processes": [p.to_dict() for p in processes]}
        modify_state(run_dir, lambda state: state.__setitem__("fleet", record))
        _await_ready(respawned, env, timeout)
    return [process.name for process in respawned]


def replace_process(run_dir: Path, name: str, kill: bool = False, timeout: float = 90.0) -> str:
    """Start a recorded process again (the supervisor's action; the caller holds the fleet lock): a worker under a
    new job id (its old one is retired for good). ``kill``: SIGKILL it first (a fenced worker that hangs or was
    stopped: it will never recover, and its leases are already back in ``seeds``). Returns the new name."""
    state = read_state(run_dir)
    record = state.get("fleet")
    if not record:
        raise FleetError("no fleet is recorded")
    processes = [FleetProcess.from_dict(data) for data in record["processes"]]
    index = next((i for i, p in enumerate(processes) if p.name == name), None)
    if index is None:
        raise FleetError(f"no process {name!r} in the fleet")
    process = processes[index]
    if process.alive:
        if kill:
            kill_hard(process.pid)
        else:
            return process.name  # it came back meanwhile
    if process.role == "worker":
        process = worker_process(_next_job(run_dir, process.spider or "list"), process.spider or "list")
    env = with_host_workers(child_env(run_dir, state), processes)
    _spawn(run_dir, process, env)
    processes[index] = process
    record = {**record, "processes": [p.to_dict() for p in processes]}
    modify_state(run_dir, lambda state: state.__setitem__("fleet", record))
    _await_ready([process], env, timeout)
    return process.name


def _next_job(run_dir: Path, spider: str) -> str:
    numbers: dict[str, int] = {}

    def take(state: dict[str, Any]) -> None:
        jobs = state.setdefault("fleet_jobs", {})
        jobs[spider] = jobs.get(spider, 0) + 1
        numbers[spider] = jobs[spider]

    modify_state(run_dir, take)
    return job_id(node_name(load({**os.environ, "CRAWLFLEET_RUN_DIR": str(run_dir)})), spider, numbers[spider])


def _spawn(run_dir: Path, process: FleetProcess, env: dict[str, str]) -> None:
    log = run_dir / "logs" / f"{process.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    process.log = str(log)
    process.log_offset = log.stat().st_size if log.exists() else 0
    process.pid = spawn(process.argv, log, env=env, cwd=PROJECT_ROOT).pid
    process.started = time.time()


def _await_ready(processes: list[FleetProcess], env: Mapping[str, str], timeout: float) -> None:
    """Wait (bounded) until every process logged its ready line (a worker: or is in the ``workers`` registry);
    a process that exits first fails the wait."""
    workers = [process.job for process in processes if process.role == "worker"]
    redis = clients.redis_client(load(env), socket_timeout=5) if workers else None
    registered: set[str] = set()

    def ready(process: FleetProcess) -> bool:
        if process.job in registered:
            return True
        with open(process.log, "rb") as log:
            log.seek(process.log_offset)
            if process.ready.encode() in log.read():
                return True
        if redis is not None and process.job and redis.zscore(keys.WORKERS, process.job) is not None:
            registered.add(process.job)
            return True
        return False

    def dead() -> str | None:
        gone = [process for process in processes if not process.alive]
        return "; ".join(f"{p.name} (pid {p.pid}) exited, see {p.log}:\n{log_tail(p.log, p.log_offset)}"
                         for p in gone) or None

    try:
        wait_for(lambda: all(ready(p) for p in processes), timeout, "the fleet's processes", 0.2, dead)
    except TimeoutError as exc:
        waiting = [f"{p.name} ({p.log})" for p in processes if p.alive and not ready(p)]
        detail = f"; not ready yet: {', '.join(waiting)}" if waiting else ""
        raise FleetError(f"{exc}{detail}. `crawlfleet down` stops what runs.") from exc
    finally:
        if redis is not None:
            redis.close()


def restart_redis_in_place(run_dir: str | os.PathLike[str], timeout: float = 60.0) -> bool:
    """Start a recorded single Redis server that died again on its own port and data directory (so that its AOF
    is replayed and every client finds it where it was); True when it did."""
    run_dir = Path(run_dir).resolve()
    record = read_state(run_dir).get("services", {}).get("redis")
    if not record or record.get("cluster") or any(pid_alive(pid) for pid in record["pids"]):
        return False
    port = record["ports"][0]
    if not port_free(port):
        return False  # taken by something else meanwhile: services.up starts a new server on a free port
    service = RedisService(aof=bool(record.get("aof")), port=port)
    started = service.start(run_dir)
    service.wait_ready(started, timeout)
    modify_state(run_dir, lambda state: state["services"]["redis"].update(pids=started.pids))
    return True


# --- environment -------------------------------------------------------------------------------------------------
def child_env(run_dir: str | os.PathLike[str], state: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The caller's environment, with the run directory and the local services' addresses from the state file."""
    state = read_state(run_dir) if state is None else state
    env = dict(os.environ)
    env["CRAWLFLEET_RUN_DIR"] = str(run_dir)
    for name, setting in SETTINGS.items():
        if setting.state_key and setting.state_key in state:
            value = state[setting.state_key]
            env[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH", "")]))
    return env


def with_host_workers(env: dict[str, str], processes: list[FleetProcess]) -> dict[str, str]:
    """``env`` telling the workers how many of them this fleet runs on the host (``CRAWLFLEET_HOST_WORKERS``, for
    the size of their page-work pools), unless the caller's environment says it already."""
    if "CRAWLFLEET_HOST_WORKERS" in env:
        return env
    workers = sum(process.role == "worker" for process in processes)
    return {**env, "CRAWLFLEET_HOST_WORKERS": str(max(1, workers))}


def _connection(env: Mapping[str, str]) -> dict[str, str]:
    pinned = {name for name, setting in SETTINGS.items() if setting.state_key}
    return {name: env[name] for name in sorted(pinned) if name in env}


# --- down and status ---------------------------------------------------------------------------------------------
def down(run_dir: str | os.PathLike[str], services: bool = True) -> list[str]:
    """Stop the fleet by PID (workers first), then (``services``) the demo web and the services; returns names."""
    run_dir = Path(run_dir).resolve()
    with locked(run_dir, "fleet"):
        record = read_state(run_dir).get("fleet") or {}
        processes = [FleetProcess.from_dict(data) for data in record.get("processes", [])]
        stopped = _stop_all(processes)
        modify_state(run_dir, lambda state: state.pop("fleet", None))
        if services:
            if stop_demoweb(run_dir):
                stopped.append("demoweb")
            stopped += local_services.down(run_dir)
    return stopped


def _stop_all(processes: list[FleetProcess]) -> list[str]:
    """Stop each role's processes side by side, role after role (STOP_ORDER); returns the names that ran."""
    stopped: list[str] = []
    for role in STOP_ORDER:
        group = [process for process in processes if process.role == role and process.pid]
        seconds = WORKER_STOP_SECONDS if role == "worker" else STOP_SECONDS
        with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
            results = list(pool.map(lambda process, s=seconds: stop_pid(process.pid, s), group))
        stopped += [process.name for process, was_running in zip(group, results, strict=True) if was_running]
    return stopped


def status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"running": bool, "owner", "redis_aof", "processes": [{name, role, pid, alive, log, job, spider}]}``."""
    record = read_state(Path(run_dir).resolve()).get("fleet")
    if not record:
        return {"running": False, "processes": []}
    processes = []
    for data in record["processes"]:
        process = FleetProcess.from_dict(data)
        processes.append({**process.to_dict(), "alive": process.alive})
    return {"running": any(p["alive"] for p in processes), "owner": record.get("owner"),
            "redis_aof": record.get("redis_aof"), "started": record.get("started"), "processes": processes}

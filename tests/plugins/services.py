"""Real services for the tests, started by the same code as ``crawlfleet services up``, and per-test isolation.

- ``local_services`` (session): Redis, ZooKeeper, Kafka and MongoDB on loopback, stopped by PID at the end. MongoDB
  runs in memory (the suite's items go with the process) with a cache of :data:`TEST_MONGO_CACHE`, which is the most
  it can hold: a full cache refuses every write. A test that stores more, or stops MongoDB, starts its own
  (``tests.plugins.mongo.OwnMongo``).
- ``cf`` (per test): an isolated view of them — its own Redis database, its own topic names, its own ZooKeeper
  chroot, its own MongoDB database — as environment variables for child processes (``cf.env``) and as resolved
  settings (``cf.settings``); emptied afterwards.
- ``procs`` (per test): starts child processes and stops every one of them by PID at teardown.
- ``redis_cluster`` (session) and ``cf_cluster`` (per test): the same against a 3-master Redis Cluster.
- ``own_kafka`` (per test): a Kafka broker (Tansu) of the test's own, to pause or stop; ``cf`` points at it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deploy import services as svc
from deploy.procs import spawn, stop_pids, wait_for
from deploy.services.mongo import IN_MEMORY
from deploy.services.redis import DATABASES, flush_cluster
from messaging import clients
from messaging.answers import partitions_of
from messaging.settings import Settings, load

REPO = Path(__file__).resolve().parents[2]
# Tansu holds a group join for about half the session timeout: short timeouts keep rebalances fast in tests.
TEST_ENV = {
    "CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS": "6000",
    "CRAWLFLEET_KAFKA_HEARTBEAT_MS": "500",
    "CRAWLFLEET_ZK_TIMEOUT": "4",
    "CRAWLFLEET_LOG_LEVEL": "INFO",
}
_sequence = itertools.count(1)


@dataclass
class Isolated:
    """One test's share of the services."""

    name: str
    env: dict[str, str]
    settings: Settings
    _clients: list[Any] = field(default_factory=list)

    def redis(self, **kwargs: Any) -> Any:
        client = clients.redis_client(self.settings, **kwargs)
        self._clients.append(client)
        return client

    def zk(self) -> Any:
        client = clients.zk_client(self.settings)
        self._clients.append(client)
        return client

    def mongo(self) -> Any:
        client = clients.mongo_client(self.settings)
        self._clients.append(client)
        return client[self.settings.mongo_db]

    def with_env(self, **overrides: str) -> dict[str, str]:
        return {**self.env, **overrides}

    def close(self) -> None:
        for client in self._clients:
            for method in ("stop", "close"):
                if hasattr(client, method):
                    try:
                        getattr(client, method)()
                    except Exception:  # teardown of a client whose server may be gone
                        pass


TEST_MONGO_CACHE = "1G"  # the session MongoDB's cap (in memory): each xdist process has its own


@pytest.fixture(scope="session")
def local_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("services")
    state = svc.up(run_dir, svc.Options(mongo_storage=IN_MEMORY, mongo_cache=TEST_MONGO_CACHE, timeout=60))
    try:
        yield {**state, "run_dir": str(run_dir)}
    finally:
        svc.down(run_dir)


def _base_env(run_dir: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
    env.update(TEST_ENV)
    env["CRAWLFLEET_RUN_DIR"] = run_dir
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _isolated(local_services: dict[str, Any], name: str) -> Iterator[Isolated]:
    number = next(_sequence)
    name = f"t{number}_{name}"
    redis_db = number % (DATABASES - 1) + 1
    host_port = local_services["redis_url"].rsplit("/", 1)[0]
    env = _base_env(local_services["run_dir"])
    env.update(
        CRAWLFLEET_REDIS_URL=f"{host_port}/{redis_db}",
        CRAWLFLEET_ZK_HOSTS=f"{local_services['zk_hosts']}/{name}",
        CRAWLFLEET_MONGO_DB=name,
        CRAWLFLEET_TOPIC_INCOMING=f"{name}.incoming",
        CRAWLFLEET_TOPIC_OUTBOUND=f"{name}.outbound",
        CRAWLFLEET_TOPIC_FAILED=f"{name}.failed",
        # a group of its own: a member a test left behind (Tansu holds joins) never stalls the next test's monitors
        CRAWLFLEET_KAFKA_GROUP=f"{name}.monitors",
    )
    # A chroot must exist before a client rooted in it can create anything.
    root = clients.zk_client(load({**env, "CRAWLFLEET_ZK_HOSTS": local_services["zk_hosts"]}))
    root.ensure_path(f"/{name}")
    isolated = Isolated(name, env, load(env))
    isolated.redis().flushdb()
    try:
        yield isolated
    finally:
        isolated.close()
        try:
            cleanup = clients.redis_client(isolated.settings)
            cleanup.flushdb()
            cleanup.close()
            root.delete(f"/{name}", recursive=True)
            mongo = clients.mongo_client(isolated.settings)
            mongo.drop_database(name)
            mongo.close()
        finally:
            root.stop()
            root.close()


def _base_name(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:40]


@pytest.fixture
def cf(local_services: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[Isolated]:
    yield from _isolated(local_services, _base_name(request.node.name))


@pytest.fixture(scope="module")
def cf_module(local_services: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[Isolated]:
    """The services' share of a whole module (its tests share one fleet or manager; each leaves it as it was)."""
    yield from _isolated(local_services, _base_name(request.module.__name__.rsplit(".", 1)[-1]))


@pytest.fixture(scope="module")
def procs_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    """Children shared by a module's tests, stopped by PID after its last test."""
    processes = Processes(tmp_path_factory.mktemp("procs"))
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("redis-cluster")
    options = svc.Options(redis_cluster=True, only=("redis",), timeout=60)
    state = svc.up(run_dir, options)
    try:
        yield state
    finally:
        svc.down(run_dir)


@pytest.fixture
def cf_cluster(cf: Isolated, redis_cluster: dict[str, Any]) -> Iterator[Isolated]:
    """Like ``cf``, but Redis is the 3-master cluster (database 0, flushed before and after)."""
    port = int(redis_cluster["redis_url"].rsplit(":", 1)[1].split("/")[0])
    env = cf.with_env(CRAWLFLEET_REDIS_URL=redis_cluster["redis_url"], CRAWLFLEET_REDIS_CLUSTER="1")
    isolated = Isolated(cf.name, env, load(env))
    flush_cluster(port)
    try:
        yield isolated
    finally:
        isolated.close()
        flush_cluster(port)


@dataclass
class OwnKafka:
    """A broker of one test's own: :meth:`pause` (SIGSTOP) and :meth:`resume` it; stopped by PID afterwards."""

    record: Any

    @property
    def pid(self) -> int:
        return int(self.record.pids[0])

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


@pytest.fixture
def own_kafka(cf: Isolated, tmp_path: Path) -> Iterator[OwnKafka]:
    """A Kafka broker for this test alone (it may pause it); ``cf`` (its env and settings) points at it."""
    from deploy.procs import free_port, pid_alive
    from deploy.services.kafka import KafkaService

    service = KafkaService(port=free_port())
    record = service.start(tmp_path)
    try:
        service.wait_ready(record, 60)
        cf.env["CRAWLFLEET_KAFKA_BOOTSTRAP"] = f"127.0.0.1:{record.port}"
        cf.settings = load(cf.env)
        yield OwnKafka(record)
    finally:
        if pid_alive(record.pids[0]):
            os.kill(record.pids[0], signal.SIGCONT)  # a stopped broker cannot stop
        service.stop(record)


def read_topic(settings: Settings, topic: str, count: int, timeout: float = 30) -> list[dict[str, Any]]:
    """The first ``count`` JSON records of ``topic`` (all partitions, from the beginning), within ``timeout``."""
    consumer = clients.kafka_consumer(settings, group_id=None)
    try:
        consumer.assign(partitions_of(consumer, topic))
        consumer.seek_to_beginning()
        found: list[dict[str, Any]] = []

        def enough() -> bool:
            for records in consumer.poll(timeout_ms=200, max_records=5000).values():
                found.extend(json.loads(record.value) for record in records)
            return len(found) >= count

        wait_for(enough, timeout, f"{count} records on {topic}", interval=0)
        return found
    finally:
        consumer.close()


def read_all(settings: Settings, topic: str, seconds: float) -> list[dict[str, Any]]:
    """Every JSON record of ``topic`` (all partitions, from the beginning), read for ``seconds``: late copies of a
    record, if any, are among them."""
    consumer = clients.kafka_consumer(settings, group_id=None)
    try:
        consumer.assign(partitions_of(consumer, topic))
        consumer.seek_to_beginning()
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200, max_records=5000).values():
                found += [json.loads(record.value) for record in records]
        return found
    finally:
        consumer.close()


class Processes:
    """Children of one test; each is stopped by PID at teardown, and its log is shown when it failed.

    At teardown the test's own services (started with ``service=True``: a MongoDB, a Redis) are stopped after
    everything else, which may still write to them as it stops; within each of the two waves the processes stop
    together (SIGTERM to all, one bounded wait), so a fleet of six takes as long to stop as its slowest member.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.services: set[int] = set()  # pids stopped in the second wave

    def start(self, argv: Sequence[str], env: Mapping[str, str], name: str | None = None,
              cwd: str | os.PathLike[str] | None = None, service: bool = False) -> subprocess.Popen[bytes]:
        name = name or Path(argv[0]).name
        log = self.log_dir / f"{name}-{len(self.started)}.log"
        proc = spawn(argv, log, env=env, cwd=cwd or REPO)
        self.started.append((name, proc, log))
        if service:
            self.services.add(proc.pid)
        return proc

    def python(self, *args: str, env: Mapping[str, str], name: str | None = None) -> subprocess.Popen[bytes]:
        """``python -m …`` or a script, with this interpreter."""
        return self.start([sys.executable, *args], env, name or (args[1] if args[0] == "-m" else args[0]))

    def crawlfleet(self, *args: str, env: Mapping[str, str], name: str | None = None) -> subprocess.Popen[bytes]:
        return self.python("-m", "deploy.cli", *args, env=env, name=name or f"crawlfleet-{args[0]}")

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        for _, candidate, path in self.started:
            if candidate is proc:
                return path.read_text(errors="replace") if path.exists() else ""
        raise KeyError(proc.pid)

    def wait_log(self, proc: subprocess.Popen[bytes], text: str, timeout: float) -> None:
        def exited() -> str | None:
            return f"exited with {proc.returncode}:\n{self.log(proc)[-2000:]}" if proc.poll() is not None else None

        wait_for(lambda: text in self.log(proc), timeout, f"{text!r} in the log of pid {proc.pid}", 0.1, exited)

    def stop_all(self) -> None:
        procs = [proc for _, proc, _ in reversed(self.started)]
        for wave in ([p for p in procs if p.pid not in self.services], [p for p in procs if p.pid in self.services]):
            stop_pids([proc.pid for proc in wave], timeout=10)
            for proc in wave:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()

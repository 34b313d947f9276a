"""Redis: Debian's ``redis-server`` on loopback, one server or a 3-master Redis Cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import redis as redis_py
import redis.cluster

from deploy.procs import free_port, port_free, spawn, wait_for
from deploy.services.base import LocalService, ServiceError, ServiceRecord
from messaging import keys

# Enough databases that every test can have its own (isolation without key prefixes).
DATABASES = 4096
HEALTH_TTL = 60  # seconds a health check's key lives
# A cluster node also listens on its port + 10000 (the cluster bus).
CLUSTER_BUS_OFFSET = 10000


def redis_server_bin() -> str:
    path = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(path).exists():
        raise ServiceError("redis-server not found: install Debian's redis-server (make install-deps)")
    return path


def _argv(port: int, data_dir: Path, aof: bool, *extra: str) -> list[str]:
    return [
        redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "no",
        "--dir", str(data_dir), "--save", "", "--appendonly", "yes" if aof else "no",
        "--databases", str(DATABASES), "--daemonize", "no", "--logfile", "",
        *extra,
    ]  # fmt: skip


class RedisService(LocalService):
    name = "redis"

    def __init__(self, aof: bool = False, port: int | None = None) -> None:
        self.aof = aof
        self.port = port  # None: a free one; a fixed port restarts a server where its clients look for it

    def start(self, run_dir: Path) -> ServiceRecord:
        data_dir = run_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        port = self.port or free_port()
        log = run_dir / "redis.log"
        proc = spawn(_argv(port, data_dir, self.aof), log)
        return ServiceRecord(self.name, [proc.pid], [port], str(log), str(data_dir), {"aof": self.aof})

    def ready(self, record: ServiceRecord) -> bool:
        return _pings(self.host, record.port)

    def healthy(self, record: ServiceRecord) -> bool:
        """A write (``SET health:services EX``): a Redis that answers PING but refuses writes (out of memory, a
        failed AOF write with ``stop-writes-on-bgsave-error``, read-only) is not healthy."""
        with redis_py.Redis(host=self.host, port=record.port, socket_timeout=2) as client:
            return bool(client.set(keys.health("services"), "ok", ex=HEALTH_TTL))

    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        return {"redis_url": f"redis://{self.host}:{record.port}/0", "redis_cluster": False}


class RedisClusterService(LocalService):
    """Three masters, no replicas: enough for hash-tag and cross-slot behaviour in tests."""

    name = "redis"
    nodes = 3

    def start(self, run_dir: Path) -> ServiceRecord:
        data_dir = run_dir / "redis-cluster"
        data_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / "redis-cluster.log"
        pids, ports = [], []
        for _ in range(self.nodes):
            port = _cluster_port()
            node_dir = data_dir / str(port)
            node_dir.mkdir(exist_ok=True)
            argv = _argv(port, node_dir, False, "--cluster-enabled", "yes",
                         "--cluster-config-file", f"nodes-{port}.conf", "--cluster-node-timeout", "2000")
            pids.append(spawn(argv, log).pid)
            ports.append(port)
        return ServiceRecord(self.name, pids, ports, str(log), str(data_dir), {"cluster": True})

    def wait_ready(self, record: ServiceRecord, timeout: float) -> None:
        # The nodes answer PING before they form a cluster; form it, then wait for every node to agree.
        try:
            wait_for(lambda: all(_pings(self.host, port) for port in record.ports), timeout,
                     f"redis cluster nodes on {record.ports}", 0.1)
        except TimeoutError as exc:
            raise ServiceError(f"redis cluster nodes did not start: {exc}; see {record.log}") from exc
        self._create(record)
        super().wait_ready(record, timeout)

    def _create(self, record: ServiceRecord) -> None:
        with redis_py.Redis(host=self.host, port=record.port, socket_timeout=2) as client:
            if client.execute_command("CLUSTER INFO").get("cluster_state") == "ok":
                return
        nodes = [f"{self.host}:{port}" for port in record.ports]
        result = subprocess.run(
            ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise ServiceError(f"redis-cli --cluster create failed: {result.stdout[-800:]} {result.stderr[-800:]}")

    def ready(self, record: ServiceRecord) -> bool:
        for port in record.ports:
            with redis_py.Redis(host=self.host, port=port, socket_timeout=1) as client:
                info = client.execute_command("CLUSTER INFO")
                if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) < self.nodes:
                    return False
        return True

    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        return {"redis_url": f"redis://{self.host}:{record.port}/0", "redis_cluster": True}


def _cluster_port() -> int:
    """A free port whose cluster-bus twin (port + 10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port + CLUSTER_BUS_OFFSET <= 65535 and port_free(port + CLUSTER_BUS_OFFSET):
            return port
    raise ServiceError("no free port pair for a Redis Cluster node")


def _pings(host: str, port: int) -> bool:
    with redis_py.Redis(host=host, port=port, socket_timeout=1) as client:
        return bool(client.ping())


def flush_cluster(port: int, host: str = "127.0.0.1") -> None:
    """Empty every master of a local cluster (tests' isolation: a cluster has only database 0)."""
    client = redis_py.cluster.RedisCluster(host=host, port=port)
    try:
        client.flushall(target_nodes=redis_py.cluster.RedisCluster.PRIMARIES)
    finally:
        client.close()

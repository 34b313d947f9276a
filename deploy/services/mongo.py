"""MongoDB wire protocol: SecantusDB (``secantusd-py`` from PyPI), on a disk path or in memory, with a bounded cache.

Where its data lives: on disk by default, under ``<run dir>/mongo/data`` (``crawlfleet up``, ``make demo``,
``crawlfleet services up``, the benchmarks over a set size): a long crawl's items stay there whatever their number,
and survive a restart. ``:memory:`` only where a test asks for it: WiredTiger's in-memory store keeps every document
in its cache, so a full cache refuses every write (``WT_CACHE_FULL``; a client sees ``InternalError``) — the cap is
the cache size.

Its cache (``--cache-size``, :func:`cache_size`) is sized from the machine's memory unless CRAWLFLEET_LOCAL_MONGO_CACHE
says otherwise: on disk it is WiredTiger's cache, not the whole server (with 753 MB the server's RSS reached 1.4 GB
over 60,000 items of ~5 KB in ``bench.soak``; SecantusDB's own default, 1 GB, let it reach 1.8 GB over 200,000), in
memory it is the cap on what it holds. Production runs MongoDB itself, untouched by this.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from deploy.procs import free_port, spawn
from deploy.services.base import LocalService, ServiceError, ServiceRecord
from messaging.settings import load


def secantus_bin() -> str:
    beside_python = Path(sys.executable).with_name("secantusd-py")
    path = str(beside_python) if beside_python.exists() else shutil.which("secantusd-py")
    if not path:
        raise ServiceError("secantusd-py not found: pip install 'crawlfleet[local]' (make venv)")
    return path


HEALTH_DB, HEALTH_COLLECTION = "crawlfleet", "health"
IN_MEMORY = ":memory:"
MB = 1 << 20
# (share of the machine's memory, floor, ceiling) of the cache, on disk and in memory
DISK_CACHE = (1 / 32, 256 * MB, 1024 * MB)
MEMORY_CACHE = (1 / 8, 512 * MB, 4096 * MB)
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory() -> int:
    """Bytes of memory this host gives its processes: physical memory, or the cgroup's limit when it is lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            physical = min(physical, int(text))
    return physical


def cache_size(in_memory: bool, memory: int | None = None) -> str:
    """SecantusDB's ``--cache-size`` for this machine (``memory`` bytes; default :func:`machine_memory`), in MB."""
    share, floor, ceiling = MEMORY_CACHE if in_memory else DISK_CACHE
    size = min(ceiling, max(floor, int((memory if memory is not None else machine_memory()) * share)))
    return f"{size // MB}M"


class MongoService(LocalService):
    name = "mongo"

    def __init__(self, storage_path: str | None = None, port: int | None = None, cache: str | None = None) -> None:
        # None: on disk under the run dir (survives a restart); ':memory:' is wiped on restart, and holds at most its
        # cache.
        self.storage_path = storage_path
        self.port = port  # None: a free one; a fixed port restarts a server where its clients look for it
        self.cache = cache  # None: CRAWLFLEET_LOCAL_MONGO_CACHE, else sized from the machine (cache_size)

    def start(self, run_dir: Path) -> ServiceRecord:
        port = self.port or free_port()
        data_dir = run_dir / "mongo"
        data_dir.mkdir(parents=True, exist_ok=True)
        storage = self.storage_path or str(data_dir / "data")
        if storage != IN_MEMORY:
            Path(storage).parent.mkdir(parents=True, exist_ok=True)
        cache = self.cache or load().local_mongo_cache or cache_size(storage == IN_MEMORY)
        argv = [secantus_bin(), "--host", self.host, "--port", str(port), "--storage-path", storage,
                "--cache-size", cache, "--log-level", "WARNING"]
        log = run_dir / "mongo.log"
        # cwd: the launcher looks for ./secantusd.toml; an empty directory keeps a stray one from applying.
        proc = spawn(argv, log, cwd=data_dir)
        return ServiceRecord(self.name, [proc.pid], [port], str(log), str(data_dir),
                             {"storage_path": storage, "cache_size": cache})

    def ready(self, record: ServiceRecord) -> bool:
        from pymongo import MongoClient

        client: MongoClient[dict[str, Any]] = MongoClient(self.host, record.port, serverSelectionTimeoutMS=1000,
                                                          connectTimeoutMS=1000)
        try:
            return client.admin.command("ping").get("ok") == 1
        finally:
            client.close()

    def healthy(self, record: ServiceRecord) -> bool:
        """A write to the health collection (``crawlfleet.health``, acknowledged): a full disk answers ping and
        fails every write, and must show as unhealthy."""
        return mongo_writes(self.host, record.port)

    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        return {"mongo_uri": f"mongodb://{self.host}:{record.port}/"}


def mongo_writes(host: str, port: int, timeout_ms: int = 3000) -> bool:
    """Upsert one document into ``crawlfleet.health``; raises with the server's reason when the write fails."""
    import time

    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(host, port, serverSelectionTimeoutMS=timeout_ms,
                                                      connectTimeoutMS=timeout_ms, socketTimeoutMS=timeout_ms,
                                                      retryWrites=False, directConnection=True)
    try:
        result = client[HEALTH_DB][HEALTH_COLLECTION].update_one(
            {"_id": "services"}, {"$set": {"at": time.time()}}, upsert=True)
        return bool(result.acknowledged)
    finally:
        client.close()

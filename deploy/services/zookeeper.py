"""ZooKeeper: Debian's package, run as ``java … QuorumPeerMain zoo.cfg`` with a data dir under the run directory."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Any

from deploy.procs import free_port, spawn
from deploy.services.base import LocalService, ServiceError, ServiceRecord

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Debian's libslf4j-java ships these bindings; the first present one sends ZooKeeper's log to our log file.
SLF4J_BINDINGS = ("/usr/share/java/slf4j-simple.jar", "/usr/share/java/slf4j-jdk14.jar")
FOUR_LETTER_WORDS = "ruok,srvr,mntr,stat,envi,conf"
# tickTime bounds the session timeouts clients may ask for (2 to 20 ticks): 1 s allows the short 4–6 s sessions
# that make master failover fast.
TICK_MS = 1000


def four_letter_word(port: int, word: str, host: str = "127.0.0.1", timeout: float = 2.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperService(LocalService):
    name = "zookeeper"

    def __init__(self, port: int | None = None) -> None:
        self.port = port  # None: a free one; a fixed port restarts a server where its clients look for it

    def start(self, run_dir: Path) -> ServiceRecord:
        java = shutil.which("java")
        if not java or not ZOOKEEPER_JAR.exists():
            raise ServiceError("java or /usr/share/java/zookeeper.jar missing: install Debian's zookeeper and a JRE "
                               "(make install-deps)")
        data_dir = run_dir / "zookeeper"
        data_dir.mkdir(parents=True, exist_ok=True)
        port = self.port or free_port()
        config = data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\ninitLimit=10\nsyncLimit=5\ndataDir={data_dir / 'data'}\nclientPort={port}\n"
            f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
            f"4lw.commands.whitelist={FOUR_LETTER_WORDS}\nmaxClientCnxns=0\n"
        )
        classpath = [str(ZOOKEEPER_JAR), *[jar for jar in SLF4J_BINDINGS if Path(jar).exists()][:1]]
        argv = [java, "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", f"-Dzookeeper.log.dir={data_dir}",
                "-cp", ":".join(classpath), "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)]
        log = run_dir / "zookeeper.log"
        proc = spawn(argv, log)
        return ServiceRecord(self.name, [proc.pid], [port], str(log), str(data_dir))

    def ready(self, record: ServiceRecord) -> bool:
        # `ruok` answers before the server serves; `srvr` reports the mode only once it does.
        return "Mode: standalone" in four_letter_word(record.port, "srvr", self.host)

    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        return {"zk_hosts": f"{self.host}:{record.port}"}

"""A SecantusDB of one test's own, for outage tests: on a disk path, so that it can be stopped and started again.

The session's MongoDB (``local_services``) is shared by every test and runs in memory; a test that takes MongoDB
down starts its own with :class:`OwnMongo` (a free port, a ``--storage-path`` under the test's ``tmp_path``), points
the components under test at :attr:`OwnMongo.uri`, and calls :meth:`~OwnMongo.stop` / :meth:`~OwnMongo.start`:
the server comes back on the same port with the same data. The process is one of the test's ``procs``, so it is
stopped by PID at teardown whatever happens.

``in_memory=True`` keeps the data in memory instead (lost on a restart): for a test that fills MongoDB with more
than the shared server should hold, whose data then goes with the process instead of a drop (SecantusDB drops a
database document by document: about 10 s for 10^5 items). ``cache`` is its ``--cache-size`` (default SecantusDB's,
1 GB): in memory, the most it holds before it refuses every write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pymongo import MongoClient

from deploy.procs import free_port, kill_hard, port_free, stop_pid, wait_for
from deploy.services.mongo import secantus_bin

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class OwnMongo:
    """A SecantusDB of this test only, on a disk path so that it can be stopped and restarted with its data."""

    def __init__(self, procs: Any, cf: Any, tmp_path: Path, name: str = "own-mongo", in_memory: bool = False,
                 cache: str | None = None) -> None:
        self.procs, self.env, self.name, self.cache = procs, cf.env, name, cache
        self.port = free_port()
        self.path: Path | str = ":memory:" if in_memory else tmp_path / f"{name}-data"
        self.cwd = tmp_path / f"{name}-cwd"  # the launcher reads ./secantusd.toml: an empty directory
        self.cwd.mkdir()
        self.proc: Any = None

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, **options: Any) -> MongoClient[dict[str, Any]]:
        """A client of this server (the caller closes it)."""
        return MongoClient(self.uri, **{"serverSelectionTimeoutMS": 5000, **options})

    def start(self) -> None:
        """Start the server (again: same port, same storage path) and wait until it answers a ping."""
        argv = [secantus_bin(), "--host", "127.0.0.1", "--port", str(self.port), "--storage-path", str(self.path),
                "--log-level", "WARNING", *(["--cache-size", self.cache] if self.cache else [])]
        self.proc = self.procs.start(argv, self.env, name=self.name, cwd=self.cwd, service=True)
        client = self.client(serverSelectionTimeoutMS=500)
        try:
            wait_for(lambda: client.admin.command("ping").get("ok") == 1, START_TIMEOUT,
                     f"SecantusDB on port {self.port}", 0.1,
                     lambda: f"exited with {self.proc.returncode}" if self.proc.poll() is not None else None)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop the server by its PID and wait until its port is free (so that :meth:`start` can take it again)."""
        stop_pid(self.proc.pid, timeout=STOP_TIMEOUT)
        wait_for(lambda: port_free(self.port), 15, f"port {self.port} to be free")

    def discard(self) -> None:
        """Kill an in-memory server outright: it has nothing to save, and a SIGTERM frees its data object by object
        (seconds for 10^5 items)."""
        assert self.path == ":memory:", "discard() is for in-memory servers; stop() keeps a disk path consistent"
        kill_hard(self.proc.pid)

"""The console's pages beyond scrapyd's: *Fleet*, one crawl (``/crawls/<crawlid>``), and a job's log followed live.

- *Fleet* (``/fleet``): every worker of every host from the registry (job, host, IP, spider type, heartbeat age,
  pages, items, speed, weight, queued and leased, CPU and memory from its own reports), the leading master and the
  standbys, the managers, the services' health; refreshed in place.
- A crawl (``/crawls/<crawlid>``): its record and progress, items per minute from MongoDB (its history, whenever the
  page is opened), HTTP statuses and reasons, an item browser with pages and a view of every field, export links,
  Stop with a confirmation; 404 for an id nobody knows.
- A job's log (``/logview/job/<job>``): tail, follow, level filter and search (``logview.js``), for jobs this manager
  started and for the workers of this host's fleet (``crawlfleet up``); ``/api/logs/<job>?offset=`` feeds it. Each
  host's manager serves its own host's logs: the fleet view links a worker to its host's manager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.web import http, resource, server

from manager import console_data, host_fleet
from manager.webservice import write_json

LOG_TAIL_LINES = 300
LOG_CHUNK_BYTES = 512 * 1024  # a follow step never sends more


def log_of_job(manager: Any, job: str) -> Path | None:
    """The log of ``job`` on this host: a job this manager started, or a worker of this host's fleet."""
    record = manager.history.get(job)
    if record is not None and record.log_path:
        return Path(record.log_path)
    process = manager.launcher.find(job)
    if process is not None:
        return Path(process.record.log_path)
    return host_fleet.fleet_log(manager.config.settings.run_dir, job)


def read_log(path: Path, offset: int | None, tail_lines: int = LOG_TAIL_LINES) -> dict[str, Any]:
    """Without ``offset``: the last lines. With it: what was appended since (at most LOG_CHUNK_BYTES)."""
    size = path.stat().st_size
    start_over = offset is None or offset > size  # a first look, or the file was rotated/truncated: the tail again
    begin = max(0, size - LOG_CHUNK_BYTES) if offset is None or offset > size else offset
    with path.open("rb") as log:
        log.seek(begin)
        chunk = log.read(min(LOG_CHUNK_BYTES, size - begin))
    end = chunk.rfind(b"\n") + 1  # whole lines only: a line being written comes whole with the next step
    lines = chunk[:end].decode("utf-8", "replace").splitlines()
    return {"offset": begin + end, "lines": lines[-tail_lines:] if start_over else lines, "size": size}


class LogApi(resource.Resource):
    """``/api/logs/<job>?offset=N``: JSON lines of the job's log (see :func:`read_log`)."""

    isLeaf = True

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager

    def render_GET(self, request: Any) -> Any:
        job = b"/".join(request.postpath).decode("utf-8", "replace")
        path = log_of_job(self.manager, job)
        node = self.manager.config.node_name
        if path is None or not path.is_file():
            write_json(request, {"node_name": node, "status": "error", "message": f"no log of job {job} on this "
                                 "host"}, http.NOT_FOUND)
            return server.NOT_DONE_YET
        raw = request.args.get(b"offset", [b""])[0]
        try:
            offset = int(raw) if raw else None
        except ValueError:
            offset = None
        d = self.manager.in_thread(read_log, path, offset)
        d.addCallback(lambda data: write_json(request, {"node_name": node, "status": "ok", "job": job, **data}))
        d.addErrback(lambda f: write_json(request, {"node_name": node, "status": "error",
                                                    "message": f.getErrorMessage()}, http.INTERNAL_SERVER_ERROR))
        return server.NOT_DONE_YET


def fleet_context(manager: Any) -> Any:
    return manager.in_thread(console_data.fleet_view, manager)


def crawl_context(manager: Any, crawlid: str, page: int, item: int | None, reasons: list[str] | None = None) -> Any:
    def read() -> dict[str, Any]:
        data = console_data.crawl_view(manager, crawlid, page, reasons)
        data["item"] = data["items"][item] if item is not None and 0 <= item < len(data["items"]) else None
        data["item_index"] = item
        return data

    return manager.in_thread(read)

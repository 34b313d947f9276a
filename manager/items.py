"""``/items/``: each job's items as scrapyd's items directory shows them (``items_dir``), read from MongoDB.

scrapyd writes a job's items to ``<items_dir>/<project>/<spider>/<job>.jl`` and serves the directory; tools built on
it (ScrapydWeb's *Items*, the Jobs page's *Items* links, ``listjobs.json``'s ``items_url``) read those listings and
files. A crawlfleet worker stores its items in MongoDB, one collection per crawl, each item with the ``job`` that
fetched it; so here:

- ``/items/``, ``/items/<project>/``, ``/items/<project>/<spider>/`` are listings in scrapyd's markup (the jobs this
  manager ran or runs, and this host's ``crawlfleet up`` workers), each job a ``<job>.jl`` whose size is its number
  of items;
- ``/items/<project>/<spider>/<job>.jl`` streams the job's items as JSON lines (without MongoDB's ``_id``), from the
  collections of the crawls the job stored items for (``worker:<job>:crawls``, written by the worker), a batch at a
  time as the client takes them (:class:`manager.export.BatchProducer`).
"""

from __future__ import annotations

import time
from typing import Any

from twisted.web import http, resource, server
from twisted.web.util import redirectTo

from manager.export import BatchProducer
from manager.logs import Listed, ScrapydDirectoryLister, not_found
from manager.security import SEGMENT
from messaging import clients, keys
from messaging.clients import as_text
from messaging.export import batches, jsonl_lines

SUFFIX = ".jl"


def job_documents(database: Any, crawlids: list[str], job: str) -> Any:
    """Batches of the job's items, crawl after crawl."""
    for crawlid in crawlids:
        yield from batches(database[crawlid], where={"job": job})


def without_ids(batch: list[dict[str, Any]]) -> bytes:
    return jsonl_lines([{k: v for k, v in document.items() if k != "_id"} for document in batch])


class Items(resource.Resource):
    isLeaf = True

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager

    def jobs(self) -> dict[str, dict[str, float]]:
        """spider -> job -> when it last changed, for every job this manager knows (its own and the fleet's)."""
        m, now = self.manager, time.time()
        found: dict[str, dict[str, float]] = {}
        for record in m.finished():
            if record.project == m.project:  # a deployed project keeps its items its own way
                found.setdefault(record.spider, {})[record.job] = record.end_time or now
        for process in m.running():
            if process.job.project == m.project:
                found.setdefault(process.job.spider, {})[process.job.job] = now
        for job in m.fleet_jobs(alive_only=False):
            found.setdefault(job.spider, {}).setdefault(job.job, now)
        return found

    def render_GET(self, request: Any) -> Any:
        segments = [s.decode("utf-8", "replace") for s in request.postpath]
        if not segments or (len(segments) < 3 and segments[-1] and not segments[-1].endswith(SUFFIX)):
            return redirectTo(request.path.rstrip(b"/") + b"/", request)  # a directory: with its slash
        if not all(SEGMENT.match(s) for s in segments if s) or len(segments) > 3:
            return not_found(request, "no such items")
        project = self.manager.project
        jobs = self.jobs()
        now = time.time()
        if segments == [""]:
            return self.listing(request, [Listed(project, True, "", now)])
        if segments == [project, ""]:
            return self.listing(request, [Listed(spider, True, "", max(js.values())) for spider, js in jobs.items()])
        if len(segments) == 3 and segments[0] == project and segments[2] == "" and segments[1] in jobs:
            spider_jobs = jobs[segments[1]]
            d = self.manager.in_thread(self.counts, list(spider_jobs))
            d.addCallback(lambda counts: [Listed(f"{job}{SUFFIX}", False, f"{counts[job]} items", when)
                                          for job, when in spider_jobs.items()])
            d.addCallbacks(lambda entries: self._finish(request, self.listing(request, entries)),
                           lambda f: self._failed(request, f))
            return server.NOT_DONE_YET
        if len(segments) == 3 and segments[0] == project and segments[2].endswith(SUFFIX):
            job = segments[2].removesuffix(SUFFIX)
            if job not in jobs.get(segments[1], {}):
                return not_found(request, "no such job")
            d = self.manager.in_thread(self.open, job)
            d.addCallbacks(lambda opened: self.stream(request, *opened), lambda f: self._failed(request, f))
            return server.NOT_DONE_YET
        return not_found(request, "no such items")

    @staticmethod
    def listing(request: Any, entries: list[Listed]) -> bytes:
        return ScrapydDirectoryLister(entries, file_type="application/x-ndjson").render(request)

    # --- MongoDB, in threads ----------------------------------------------------------------------------------------
    def crawls_of(self, job: str) -> list[str]:
        return sorted(as_text(c) for c in self.manager.redis.smembers(keys.worker_crawls(job)))

    def counts(self, jobs: list[str]) -> dict[str, int]:
        database = self.manager.mongo_db()
        return {job: sum(database[c].count_documents({"job": job}) for c in self.crawls_of(job)) for job in jobs}

    def open(self, job: str) -> tuple[Any, Any]:
        settings = self.manager.config.settings
        client = clients.mongo_client(settings, serverSelectionTimeoutMS=5000)
        return client, job_documents(client[settings.mongo_db], self.crawls_of(job), job)

    # --- answers -------------------------------------------------------------------------------------------------
    @staticmethod
    def stream(request: Any, client: Any, documents: Any) -> None:
        request.setHeader(b"content-type", b"application/x-ndjson; charset=utf-8")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.registerProducer(BatchProducer(request, client, documents, without_ids), False)

    @staticmethod
    def _finish(request: Any, body: bytes) -> None:
        request.write(body)
        request.finish()

    @staticmethod
    def _failed(request: Any, failure: Any) -> None:
        request.setResponseCode(http.SERVICE_UNAVAILABLE)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.write(f"items unavailable: {failure.getErrorMessage()}\n".encode())
        request.finish()

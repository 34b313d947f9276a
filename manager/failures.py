"""A crawl's failed URLs in the manager (issue 42; :mod:`messaging.failures`): the API, and what the crawl's page shows.

- ``GET /api/crawls/<crawlid>/failures?reason=R&format=json|jsonl|csv``: the failures list (of reason ``R``, which
  may be repeated, or all); ``json`` (the default) answers the envelope with ``failures`` (up to ``limit``, default
  1000), ``reasons`` (failing pages by reason, from the exact counts), ``listed`` and ``unlisted``; ``jsonl`` and
  ``csv`` stream every one as a download (the bytes ``crawlfleet failures --format`` writes).
- ``POST /api/crawls/<crawlid>/retry?reason=R``: ``crawlfleet retry``: the listed failures re-submitted as tasks of
  the same crawl; the answer says the retry's number, how many were re-submitted, and whether a finished crawl runs
  again. A stopped or unknown crawl: 400 with the reason.

The crawl's page (``/crawls/<crawlid>``) lists the failures with the same reasons as a filter
(:func:`failures_view`) and offers the retry; reads run in a thread, never on the reactor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from twisted.web import http, server

from manager.export import BatchProducer
from manager.webservice import JsonResource, write_json
from messaging import clients
from messaging import failures as store
from messaging.counts import UNLISTED_REASONS, read_counts

PAGE_ROWS = 100  # failures the crawl's page shows
API_LIMIT = 1000  # failures a JSON answer holds by default
_CONTENT_TYPES = {"jsonl": b"application/x-ndjson; charset=utf-8", "csv": b"text/csv; charset=utf-8"}


def reasons_of(request: Any) -> list[str]:
    return [value.decode("utf-8", "replace") for value in request.args.get(b"reason", []) if value]


def failures_view(manager: Any, crawlid: str, reasons: list[str], limit: int = PAGE_ROWS) -> dict[str, Any]:
    """The crawl's failing pages by reason (exact counts), the listed ones (of ``reasons``) up to ``limit``."""
    counts = read_counts(manager.redis, crawlid)
    by_reason = {reason: n for reason, n in sorted(counts.failures.items()) if reason not in UNLISTED_REASONS}
    rows = []
    for document in store.failures(manager.mongo_db(), manager.redis, crawlid, reasons):
        rows.append(store.row(document))
        if len(rows) >= limit:
            break
    return {"reasons": by_reason, "selected": reasons, "rows": rows, "listed": counts.listed,
            "unlisted": counts.unlisted, "shown": len(rows),
            "total": sum(by_reason[r] for r in reasons if r in by_reason) if reasons else sum(by_reason.values())}


class CrawlFailures(JsonResource):
    def __init__(self, manager: Any, crawlid: str) -> None:
        super().__init__(manager)
        self.crawlid = crawlid

    def render(self, request: Any) -> Any:
        fmt = (request.args.get(b"format") or [b"json"])[0].decode("utf-8", "replace")
        if request.method != b"GET" or fmt == "json":
            return super().render(request)
        if fmt in store.FORMATS:
            return self._stream(request, fmt)
        write_json(request, {"node_name": self.manager.config.node_name, "status": "error",
                             "message": f"format must be json, {' or '.join(store.FORMATS)}, not {fmt!r}"},
                   http.BAD_REQUEST)
        return server.NOT_DONE_YET

    def get(self, request: Any) -> Any:
        try:
            limit = int((request.args.get(b"limit") or [str(API_LIMIT).encode()])[0])
        except ValueError:
            limit = API_LIMIT
        data = self.manager.in_thread(failures_view, self.manager, self.crawlid, reasons_of(request), max(1, limit))
        return data.addCallback(lambda view: {"crawlid": self.crawlid, "failures": view.pop("rows"), **view})

    def _stream(self, request: Any, fmt: str) -> Any:
        settings = self.manager.config.settings
        client = clients.mongo_client(settings, serverSelectionTimeoutMS=5000)
        documents = store.failures(client[settings.mongo_db], self.manager.redis, self.crawlid, reasons_of(request))
        chunks: Iterator[bytes] = store.export((store.row(document) for document in documents), fmt)
        request.setHeader(b"content-type", _CONTENT_TYPES[fmt])
        request.setHeader(b"content-disposition", f'attachment; filename="failures.{fmt}"'.encode())
        request.registerProducer(BatchProducer(request, client, chunks, lambda chunk: chunk), False)
        return server.NOT_DONE_YET


class RetryFailures(JsonResource):
    def __init__(self, manager: Any, crawlid: str) -> None:
        super().__init__(manager)
        self.crawlid = crawlid

    def post(self, request: Any) -> Any:
        return self.manager.in_thread(retry, self.manager, self.crawlid, reasons_of(request))


def retry(manager: Any, crawlid: str, reasons: list[str]) -> dict[str, Any]:
    """``crawlfleet retry`` (in a thread): the outcome, or a :class:`~manager.webservice.ApiError` (400) why not."""
    from manager.webservice import ApiError

    try:
        result = store.retry(manager.redis, manager.mongo_db(), crawlid, reasons)
    except store.NotRetryable as exc:
        raise ApiError(str(exc), http.BAD_REQUEST) from None
    return dict(result.__dict__)

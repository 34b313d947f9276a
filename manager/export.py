"""``GET /api/crawls/<crawlid>/export?format=jsonl|csv``: a crawl's items streamed as a download.

The body is :mod:`messaging.export`'s (the same bytes as ``crawlfleet export``): JSON lines, or CSV with a UTF-8
byte order mark. It is written as a pull producer: the next batch is read from MongoDB in a thread only when the
client has taken the previous one, so a slow client holds back the reads and memory holds one batch. A client
that goes away stops the export (the cursor is closed). Unknown format: 400; unknown crawl: 404.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from twisted.internet import threads
from twisted.web import resource, server

from messaging import clients
from messaging.export import STREAMABLE, batches, csv_columns, csv_header, csv_rows, jsonl_lines

logger = logging.getLogger(__name__)

_CONTENT_TYPES = {"jsonl": b"application/x-ndjson; charset=utf-8", "csv": b"text/csv; charset=utf-8"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._@-]")


class BatchProducer:
    """Writes one batch of documents per ``resumeProducing`` (the transport asks again once it has sent it), each
    read in a thread from ``documents`` (an iterator of batches) and turned into bytes by ``render``; closes the
    iterator and the MongoDB ``client`` at the end, or when the client goes away."""

    def __init__(self, request: Any, client: Any, documents: Iterator[Any], render: Callable[[Any], bytes]) -> None:
        self.request = request
        self.client = client
        self.render = render
        self.batches = documents
        self.busy = self.stopped = self.closed = False
        request.notifyFinish().addBoth(lambda _: self.stopProducing())

    def _next(self) -> bytes | None:  # in a thread
        batch = next(self.batches, None)
        if batch is None:
            return None
        return self.render(batch)

    def resumeProducing(self) -> None:
        if self.busy or self.stopped:
            return
        self.busy = True
        d = threads.deferToThread(self._next)
        d.addCallbacks(self._got, self._failed)

    def _got(self, chunk: bytes | None) -> None:
        self.busy = False
        if self.stopped:  # the client went away while the batch was read
            self._close()
            return
        if chunk is None:
            self._finish()
            return
        self.request.write(chunk)

    def _failed(self, failure: Any) -> None:
        self.busy = False
        logger.error("streaming %s failed: %s", self.request.path, failure.getErrorMessage())
        if self.stopped:
            self._close()
        else:
            self._finish(abort=True)

    def _finish(self, abort: bool = False) -> None:
        self.stopped = True
        self.request.unregisterProducer()
        if abort:
            self.request.loseConnection()  # a truncated body must not look complete
        else:
            self.request.finish()
        self._close()

    def pauseProducing(self) -> None:  # a pull producer is only ever asked for more
        pass

    def stopProducing(self) -> None:
        if not self.stopped:
            self.stopped = True
        self._close()

    def _close(self) -> None:
        if self.busy or self.closed:  # the thread still reads: closed when it is done
            return
        self.closed = True
        closing, self.batches = self.batches, iter(())
        threads.deferToThread(_close_quietly, closing, self.client)


def _close_quietly(generator: Any, client: Any) -> None:
    try:
        if hasattr(generator, "close"):
            generator.close()
    finally:
        client.close()


class CrawlExport(resource.Resource):
    isLeaf = True

    def __init__(self, manager: Any, crawlid: str) -> None:
        super().__init__()
        self.manager = manager
        self.crawlid = crawlid

    def render_GET(self, request: Any) -> Any:
        format = (request.args.get(b"format") or [b"jsonl"])[0].decode("utf-8", "replace")
        if format not in STREAMABLE:
            request.setResponseCode(400)
            request.setHeader(b"content-type", b"text/plain; charset=utf-8")
            return f"format must be one of {', '.join(STREAMABLE)}, not {format!r}\n".encode()
        d = self.manager.in_thread(self._open, format)
        d.addCallbacks(lambda opened: self._start(request, format, *opened), lambda f: self._error(request, f))
        return server.NOT_DONE_YET

    def _open(self, format: str) -> tuple[Any, Any, list[str] | None]:  # in a thread
        settings = self.manager.config.settings
        client = clients.mongo_client(settings, serverSelectionTimeoutMS=5000)
        try:
            database = client[settings.mongo_db]
            if self.crawlid not in database.list_collection_names():
                raise LookupError(f"no items of crawl {self.crawlid!r}")
            collection = database[self.crawlid]
            return client, collection, csv_columns(collection) if format == "csv" else None
        except BaseException:
            client.close()
            raise

    def _start(self, request: Any, format: str, client: Any, collection: Any, columns: list[str] | None) -> None:
        name = _SAFE_NAME.sub("_", self.crawlid)
        request.setHeader(b"content-type", _CONTENT_TYPES[format])
        request.setHeader(b"content-disposition", f'attachment; filename="{name}.{format}"'.encode())
        if columns is not None:
            request.write(csv_header(columns))
        def render(batch: list[dict[str, Any]]) -> bytes:
            return jsonl_lines(batch) if format == "jsonl" else csv_rows(batch, columns or [])

        request.registerProducer(BatchProducer(request, client, batches(collection), render), False)

    def _error(self, request: Any, failure: Any) -> None:
        not_found = failure.check(LookupError) is not None
        request.setResponseCode(404 if not_found else 503)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.write(f"{failure.getErrorMessage()}\n".encode())
        request.finish()

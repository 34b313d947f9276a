"""The WARC writer thread of a worker: exchanges in, records out, off the reactor.

The reactor thread only hands over an :class:`Exchange` (references to the bytes Scrapy already holds, a few
strings) with :meth:`WarcWriter.submit`; one thread builds the records with warcio, computes digests, gzips and
writes them (:class:`~spiders.warc.files.RotatingWarcFiles`). Per exchange: a ``response`` record (or a ``revisit``
when its payload digest was written before by this worker: ``WARC-Refers-To-Target-URI`` and
``WARC-Refers-To-Date`` name the first capture, profile ``identical-payload-digest``), the ``request`` record and a
``metadata`` record (crawl, job, depth, referer, fetch time), both ``WARC-Concurrent-To`` the response.

The digests remembered are bounded (``dedup_entries``, oldest forgotten first). The thread counts its own CPU time
(``time.thread_time``), so the worker can tell the writer's share of its CPU.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders

from spiders.warc.files import RotatingWarcFiles

__all__ = ["Exchange", "WarcWriter", "payload_digest"]

logger = logging.getLogger(__name__)
_DROPPED_HEADERS = frozenset(("transfer-encoding",))  # the body is stored as Scrapy holds it: de-chunked


def payload_digest(body: bytes) -> str:
    """The WARC payload digest of ``body`` as warcio writes it (SHA-1, base32)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


@dataclass(slots=True)
class Exchange:
    """One fetch as the worker saw it: what the writer thread needs, captured on the reactor thread."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int
    reason: str
    response_headers: list[tuple[str, str]]
    body: bytes
    fetched: datetime
    ip: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # for the metadata record: crawlid, job, depth, via


def _warc_date(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


class WarcWriter:
    """A worker's WARC writer: :meth:`submit` from any thread, records written by one thread of its own."""

    def __init__(self, directory: str | Path, job: str, *, prefix: str = "crawlfleet", max_size: int = 10**9,
                 dedup_entries: int = 1_000_000, info: dict[str, str] | None = None,
                 files: RotatingWarcFiles | None = None) -> None:
        self.files = files or RotatingWarcFiles(directory, job, prefix, max_size, info)
        self.dedup_entries = dedup_entries
        self._seen: OrderedDict[str, tuple[str, str]] = OrderedDict()  # digest -> (uri, WARC-Date)
        self._queue: queue.SimpleQueue[Exchange | None] = queue.SimpleQueue()
        self.pending_bytes = 0
        self.written = {"response": 0, "revisit": 0, "request": 0, "metadata": 0}
        self.failed = 0
        self.cpu_seconds = 0.0  # the writer thread's own CPU time
        self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)
        self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        """Queue an exchange; never blocks (the reactor calls it)."""
        self.pending_bytes += len(exchange.body) + len(exchange.request_body)
        self._queue.put(exchange)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued, close and index the last file; False if the thread did not finish in time."""
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            exchange = self._queue.get()
            started = time.thread_time()
            try:
                if exchange is None:
                    self.files.close()
                    self.files.wait_indexes()
                    return
                self.pending_bytes -= len(exchange.body) + len(exchange.request_body)
                self._write(exchange)
            except Exception:  # one bad exchange (or a full disk) must not stop the thread: logged and counted
                self.failed += 1
                logger.exception("WARC writer failed on %s", getattr(exchange, "url", None))
            finally:
                self.cpu_seconds += time.thread_time() - started

    def _write(self, exchange: Exchange) -> None:
        writer = self.files.writer
        date = _warc_date(exchange.fetched)
        digest = payload_digest(exchange.body)
        headers = [(k, v) for k, v in exchange.response_headers if k.lower() not in _DROPPED_HEADERS]
        http_headers = StatusAndHeaders(f"{exchange.status} {exchange.reason}".strip(), headers, protocol="HTTP/1.1")
        warc_headers = {"WARC-Date": date}
        if exchange.ip:
            warc_headers["WARC-IP-Address"] = exchange.ip
        first = self._seen.get(digest) if exchange.body else None
        if first is not None:
            record = writer.create_revisit_record(exchange.url, digest, first[0], first[1], http_headers=http_headers,
                                                  warc_headers_dict=warc_headers)
            kind = "revisit"
        else:
            record = writer.create_warc_record(exchange.url, "response", payload=BytesIO(exchange.body),
                                               length=len(exchange.body), http_headers=http_headers,
                                               warc_headers_dict={**warc_headers, "WARC-Payload-Digest": digest})
            kind = "response"
            if exchange.body:
                self._remember(digest, exchange.url, date)
        record_id = record.rec_headers.get_header("WARC-Record-ID")
        self._write_one(record, kind)
        self._write_one(self._request_record(writer, exchange, date, record_id), "request")
        self._write_one(self._metadata_record(writer, exchange, date, record_id), "metadata")

    def _write_one(self, record: Any, kind: str) -> None:
        self.files.write(record)  # rotation is checked after every record: a file ends within one of the limit
        self.written[kind] += 1

    def _remember(self, digest: str, url: str, date: str) -> None:
        self._seen[digest] = (url, date)
        if len(self._seen) > self.dedup_entries:
            self._seen.popitem(last=False)

    @staticmethod
    def _request_record(writer: Any, exchange: Exchange, date: str, concurrent_to: str) -> Any:
        parts = urlsplit(exchange.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = list(exchange.request_headers)
        if not any(k.lower() == "host" for k, _ in headers):
            headers.insert(0, ("Host", parts.netloc))
        http_headers = StatusAndHeaders(f"{exchange.method} {target} HTTP/1.1", headers, is_http_request=True)
        return writer.create_warc_record(exchange.url, "request", payload=BytesIO(exchange.request_body),
                                         length=len(exchange.request_body), http_headers=http_headers,
                                         warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": concurrent_to})

    @staticmethod
    def _metadata_record(writer: Any, exchange: Exchange, date: str, concurrent_to: str) -> Any:
        body = "".join(f"{name}: {' '.join(str(value).split())}\r\n" for name, value in exchange.fields.items()
                       if value not in (None, "")).encode("utf-8")
        return writer.create_warc_record(exchange.url, "metadata", payload=BytesIO(body), length=len(body),
                                         warc_content_type="application/warc-fields",
                                         warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": concurrent_to})

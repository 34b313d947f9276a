"""A webhook receiver on loopback for the alert tests: records every POST (headers, body, the answer it gave) and
answers as the test says (e.g. 500 the first time an event comes). Started and stopped by the test (a thread)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from messaging.notify import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        """The signature checks out and covers the timestamp the header states."""
        return (verify(secret, self.body, self.headers.get(SIGNATURE_HEADER, ""))
                and str(self.event["timestamp"]) == self.headers.get(TIMESTAMP_HEADER)
                and self.event["id"] == self.headers.get(IDEMPOTENCY_HEADER))


@dataclass
class Receiver:
    answer: Callable[[dict[str, Any], int], int] = lambda event, seen: 200  # (event, times seen before) -> status
    received: list[Delivery] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    event = json.loads(body)
                    seen = sum(1 for d in receiver.received if d.event["id"] == event["id"])
                    status = receiver.answer(event, seen)
                    receiver.received.append(Delivery(self.path, dict(self.headers), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def accepted(self) -> list[Delivery]:
        """Deliveries the receiver answered with a 2xx: what it acted on."""
        return [d for d in self.received if 200 <= d.status < 300]

    def kinds(self, crawlid: str) -> Counter[str]:
        """Accepted events of a crawl by kind."""
        return Counter(d.event["event"] for d in self.accepted() if d.event["crawlid"] == crawlid)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

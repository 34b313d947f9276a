"""The manager's doors (``manager.security``, ``manager.channel``): a state change needs the form token or a JSON
body (scrapyd's form clients without ``Origin`` pass), a body is bounded before it is read, slow and idle clients
are cut off. One manager for the module: each test leaves it as it found it."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any

import pytest
import requests

from deploy.procs import wait_for
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e
CRAWL = {"url": "http://news.example.com/", "spider_type": "list", "crawlid": "doors", "userid": "t",
         "rule": {"first_page_xpath": {"list_from": "//li", "second_page_url": "a/@href", "title": "a"},
                  "second_page_xpath": {"body": "//p"}}}


@pytest.fixture(scope="module")
def doors(cf_module: Isolated, procs_module: Processes) -> ManagerProcess:
    """A manager with 2-second read timeouts and a 64 KiB body limit."""
    return ManagerProcess(procs_module, cf_module.env, procs_module.log_dir / "manager",
                          CRAWLFLEET_MANAGER_HEADER_TIMEOUT="2", CRAWLFLEET_MANAGER_BODY_TIMEOUT="2",
                          CRAWLFLEET_MANAGER_MAX_BODY=str(64 * 1024), CRAWLFLEET_PROMETHEUS_SD_FILE="off").start()


def token(manager: ManagerProcess) -> str:
    page = requests.get(f"{manager.url}/spiders", timeout=30).text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def check(manager: ManagerProcess, **kwargs: Any) -> requests.Response:
    """``/api/crawl?check=1``: validated, never sent (an answer says the request passed the door)."""
    return requests.post(f"{manager.url}/api/crawl?check=1", timeout=30, **kwargs)


def test_a_state_change_needs_the_token_or_a_json_body(doors: ManagerProcess) -> None:
    body = json.dumps(CRAWL)
    plain = check(doors, data=body, headers={"Content-Type": "text/plain"})  # what a page elsewhere can send
    assert plain.status_code == 403 and "form token" in plain.json()["message"]
    assert check(doors, data=body.encode()).status_code == 403  # a body with no content type
    site = requests.post(f"{doors.url}/api/sites/example.com", data=json.dumps({"action": "rate", "rate": 1}),
                         headers={"Content-Type": "text/plain"}, timeout=30)
    assert site.status_code == 403
    stop = requests.post(f"{doors.url}/api/crawls/doors/stop", data="x", headers={"Content-Type": "text/plain"},
                         timeout=30)
    assert stop.status_code == 403
    bodiless = check(doors)  # no body, no Origin: `curl -X POST`, an API action; the request itself is then checked
    assert bodiless.status_code == 400 and bodiless.json()["status"] == "rejected"
    assert check(doors, headers={"Origin": "http://evil.example"}).status_code == 403

    assert check(doors, json=CRAWL).json()["valid"] is True  # JSON, no Origin: curl, a script
    same = check(doors, json=CRAWL, headers={"Origin": doors.url})
    assert same.json()["valid"] is True  # the manager's own page (fetch sends Origin)
    for origin in ("http://evil.example", "null"):
        assert check(doors, json=CRAWL, headers={"Origin": origin}).status_code == 403
    with_token = check(doors, data=body, headers={"Content-Type": "text/plain", "X-CSRF-Token": token(doors)})
    assert with_token.json()["valid"] is True
    assert check(doors, data=body, headers={"Content-Type": "text/plain", "X-CSRF-Token": "forged"}).status_code == 403


def test_scrapyd_clients_form_posts_pass_and_a_browsers_do_not(doors: ManagerProcess) -> None:
    form = {"project": "crawlfleet", "spider": "nope"}
    client = requests.post(f"{doors.url}/schedule.json", data=form, timeout=60)  # scrapyd-client, ScrapydWeb
    assert client.status_code == 200 and client.json()["message"] == "spider 'nope' not found"
    for origin in (doors.url, "null", "http://evil.example"):  # a browser's form: Origin, and no token
        refused = requests.post(f"{doors.url}/schedule.json", data=form, headers={"Origin": origin}, timeout=30)
        assert refused.status_code == 403, origin
    text = requests.post(f"{doors.url}/cancel.json", data="project=crawlfleet&job=x",
                         headers={"Content-Type": "text/plain"}, timeout=30)
    assert text.status_code == 403
    assert requests.post(f"{doors.url}/jobs", data={"job": "x"}, timeout=30).status_code == 403  # a page: the token


def raw(manager: ManagerProcess, head: bytes, body: bytes = b"") -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", manager.port), timeout=30)
    connection.sendall(head + body)
    return connection


def answer(connection: socket.socket) -> bytes:
    """Everything the manager sends until it closes the connection."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def test_a_body_over_the_limit_is_refused_from_its_length_before_it_is_read(doors: ManagerProcess) -> None:
    head = (b"POST /schedule.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded"
            b"\r\nContent-Length: 100000000\r\n\r\n")
    connection = raw(doors, head, b"project=crawlfleet&spider=list&x=" + b"a" * 16384)  # 16 KiB of 100 MB sent
    reply = answer(connection)
    assert reply.startswith(b"HTTP/1.1 413 ") and b"at most 65536" in reply
    connection.close()
    for path in (b"/api/crawl", b"/spiders", b"/no-such-page"):  # everywhere, before any resource or auth
        reply = answer(raw(doors, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 70000\r\n\r\n"))
        assert reply.startswith(b"HTTP/1.1 413 "), path
    chunked = (b"POST /schedule.json HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               + (b"4000\r\n" + b"a" * 0x4000 + b"\r\n") * 5)  # 80 KiB in chunks: no length to check beforehand
    assert answer(raw(doors, chunked)).startswith(b"HTTP/1.1 413 ")
    small = requests.post(f"{doors.url}/schedule.json", data={"project": "crawlfleet", "spider": "nope"}, timeout=60)
    assert small.status_code == 200  # and the manager still answers


def test_slow_and_idle_connections_are_closed(doors: ManagerProcess) -> None:
    idle = [socket.create_connection(("127.0.0.1", doors.port), timeout=30) for _ in range(300)]
    slow = raw(doors, b"GET /daemonstatus.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    body = raw(doors, b"POST /schedule.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\n", b"project=")
    assert requests.get(f"{doors.url}/daemonstatus.json", timeout=30).json()["status"] == "ok"  # still answers
    for connection in [*idle, slow, body]:
        connection.setblocking(False)
    closed: dict[int, bytes] = {}
    deadline = time.monotonic() + 30  # the limits are 2 s: far less than Twisted's own 60 s idle timeout

    def sweep() -> bool:
        if time.monotonic() < deadline:
            try:
                slow.send(b"X-Drip: 1\r\n")  # a header now and then: slowloris, which must not extend the deadline
            except OSError:
                pass
        for number, connection in enumerate([*idle, slow, body]):
            if number in closed:
                continue
            try:
                data = connection.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[number] = b""
            else:
                closed[number] = data
        return len(closed) == len(idle) + 2

    wait_for(sweep, 30, "every idle and slow connection closed by the manager", 0.25)
    assert closed[len(idle)].startswith(b"HTTP/1.1 408 ") and b"headers" in closed[len(idle)]
    assert closed[len(idle) + 1].startswith(b"HTTP/1.1 408 ") and b"body" in closed[len(idle) + 1]
    assert all(closed[n] == b"" for n in range(len(idle)))  # idle: closed without an answer
    for connection in [*idle, slow, body]:
        connection.close()
    assert requests.get(f"{doors.url}/daemonstatus.json", timeout=30).json()["status"] == "ok"

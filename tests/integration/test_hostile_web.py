"""The demo web's hostile site answers as its manifest says: huge, looping, bombing, lying and broken pages."""

import http.client
import json
import re
import zlib
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
from twisted.internet.task import Clock
from twisted.web.test.requesthelper import DummyRequest

from deploy.demoweb import build_sites, fetch
from deploy.demoweb.busy import BUSY_PAGES, BUSY_RETRY_AFTER, BUSY_SECONDS, busy_title
from deploy.demoweb.hostile import (
    BOMB_INFLATED_BYTES,
    BROKEN_TITLE,
    HOSTILE_NAME,
    HUGE_BYTES,
    LINK_COUNT,
    LINK_TARGETS,
    LYING_TITLE,
    PAGES,
    GeneratedBody,
)
from deploy.demoweb.resources import DemoResource
from deploy.demoweb.router import STATS_PATH, Router
from deploy.procs import wait_for
from spiders.encoding import decode_html

pytestmark = pytest.mark.integration

MIB = 1 << 20


def get(demoweb, path, method="GET"):
    """(status, headers, body) of ``path`` on the hostile site (no redirects followed)."""
    if method == "GET":
        return fetch(demoweb["sites"][HOSTILE_NAME], demoweb["port"], HOSTILE_NAME, path)
    conn = _connection(demoweb)
    try:
        conn.request(method, path, headers={"Host": f"{HOSTILE_NAME}:{demoweb['port']}"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _connection(demoweb, timeout=30.0):
    return http.client.HTTPConnection(demoweb["sites"][HOSTILE_NAME], demoweb["port"], timeout=timeout)


def stream(demoweb, path, on_piece, limit=None):
    """GET ``path`` and hand its body to ``on_piece`` in 1 MiB pieces (at most ``limit`` bytes); returns headers."""
    conn = _connection(demoweb)
    try:
        conn.request("GET", path, headers={"Host": f"{HOSTILE_NAME}:{demoweb['port']}"})
        response = conn.getresponse()
        received = 0
        while limit is None or received < limit:
            piece = response.read(MIB)
            if not piece:
                break
            received += len(piece)
            on_piece(piece)
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def test_the_manifest_and_the_index_describe_every_hostile_page(demoweb):
    described = demoweb["manifest"]["hostile"][HOSTILE_NAME]
    assert described["ip"] == demoweb["sites"][HOSTILE_NAME] == "127.0.0.15"
    assert set(described["pages"]) == set(PAGES) == {"/huge", "/loop/a", "/bomb.html", "/lying.html",
                                                     "/broken.html", "/links.html"}
    assert all(page["expect"] and page["what"] for page in described["pages"].values())
    assert (described["tasks"], described["items"]) == (107, 104)  # what a crawl of the whole site gives
    assert HOSTILE_NAME not in demoweb["manifest"]["sites"]  # the content sites' checks do not apply to it
    status, _, index = get(demoweb, "/")
    assert status == 200
    assert set(re.findall(r'href="([^"]+)"', index.decode())) == set(PAGES)
    assert get(demoweb, "/robots.txt")[0] == 200
    assert get(demoweb, "/nothing/here")[0] == 404


def test_huge_page_is_streamed_in_full_and_a_client_may_leave_half_way(demoweb):
    total, tail = 0, b""

    def count(piece):
        nonlocal total, tail
        total += len(piece)
        tail = (tail + piece)[-64:]

    status, headers = stream(demoweb, "/huge", count)
    assert status == 200 and int(headers["content-length"]) == HUGE_BYTES == 50 * MIB
    assert total == HUGE_BYTES and tail.endswith(b"</body></html>\n")

    status, headers = stream(demoweb, "/huge", lambda piece: None, limit=2 * MIB)  # leaves after 2 MiB
    assert status == 200
    assert get(demoweb, "/")[0] == 200  # the server still answers
    status, headers, body = get(demoweb, "/huge", method="HEAD")
    assert status == 200 and int(headers["content-length"]) == HUGE_BYTES and body == b""


def test_generated_body_reads_the_same_in_any_piece_size():
    whole = GeneratedBody(b"<head>", b"0123456789", b"</tail>", 100).read()
    assert len(whole) == 100 and whole.startswith(b"<head>0123") and whole.endswith(b"</tail>")
    for size in (1, 3, 7, 64):
        body, pieces = GeneratedBody(b"<head>", b"0123456789", b"</tail>", 100), []
        while piece := body.read(size):
            assert len(piece) <= size
            pieces.append(piece)
        assert b"".join(pieces) == whole


def test_redirect_loop_never_ends(demoweb):
    url = demoweb["manifest"]["hostile"][HOSTILE_NAME]["url"]
    path = "/loop/a"
    for _ in range(6):
        status, headers, _ = get(demoweb, path)
        assert status == 302
        path = "/" + headers["location"].removeprefix(url)
    assert path == "/loop/a"


def test_gzip_bomb_is_small_on_the_wire_and_inflates_to_a_gibibyte(demoweb):
    status, headers, body = get(demoweb, "/bomb.html")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(body) < 2 * MIB
    inflater, inflated, data, start = zlib.decompressobj(zlib.MAX_WBITS | 16), 0, body, b""
    while not inflater.eof:
        piece = inflater.decompress(data, 16 * MIB)  # bounded pieces: never the whole gibibyte at once
        start = start or piece[:64]
        inflated += len(piece)
        data = inflater.unconsumed_tail
        assert piece or data, "the stream ended without its trailer"
    assert inflated == BOMB_INFLATED_BYTES == 1024 * MIB  # the trailer's CRC and size were checked by zlib
    assert start.startswith(b"<!DOCTYPE html>")
    assert get(demoweb, "/bomb.html")[2] == body  # built once, served the same


def test_lying_page_is_gbk_under_a_utf8_header(demoweb):
    status, headers, body = get(demoweb, "/lying.html")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    assert LYING_TITLE in body.decode("gbk") and b"charset" not in body
    text, encoding = decode_html(body, headers["content-type"])  # what the manifest promises a crawl makes of it
    assert encoding == demoweb["manifest"]["hostile"][HOSTILE_NAME]["pages"]["/lying.html"]["encoding"]
    assert f"<title>{LYING_TITLE}</title>" in text


def test_broken_page_has_invalid_sequences_and_a_sound_title(demoweb):
    status, headers, body = get(demoweb, "/broken.html")
    assert status == 200
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    text, encoding = decode_html(body, headers["content-type"])
    assert encoding == "utf-8" and f"<title>{BROKEN_TITLE}</title>" in text and "\ufffd" in text


def test_link_farm_points_to_a_bounded_set_of_existing_pages(demoweb):
    status, _, body = get(demoweb, "/links.html")
    assert status == 200
    base = demoweb["manifest"]["hostile"][HOSTILE_NAME]["url"] + "links.html"
    hrefs = re.findall(r'href="([^"]+)"', body.decode())
    assert len(hrefs) == LINK_COUNT == 10_000
    targets = {urldefrag(urljoin(base, href)).url for href in hrefs}
    assert len(targets) == LINK_TARGETS
    assert targets == set(demoweb["manifest"]["hostile"][HOSTILE_NAME]["plain_pages"])
    for url in sorted(targets):
        assert get(demoweb, urlparse(url).path)[0] == 200
    assert get(demoweb, f"/pages/{LINK_TARGETS}.html")[0] == 404


def test_the_servers_request_counter_counts_the_hostile_site(demoweb):
    def answers():
        stats = json.loads(get(demoweb, STATS_PATH)[2])
        return stats.get(HOSTILE_NAME, {"status": {}})["status"]

    before = answers()
    get(demoweb, "/loop/b")
    get(demoweb, "/pages/1.html")
    get(demoweb, "/pages/x.html")
    after = answers()
    assert after.get("302", 0) - before.get("302", 0) == 1
    assert after.get("200", 0) - before.get("200", 0) == 2  # a page, and the first stats page (counted after it)
    assert after.get("404", 0) - before.get("404", 0) == 1


# --- the busy area of the content sites (/busy/: 429 with a Retry-After for a moment, then 200) -------------------
def test_busy_area_answers_429_in_its_window_then_200_in_simulated_time():
    clock = Clock()
    clock.advance(1000.0)
    resource = DemoResource(Router(build_sites(10), port=8000, pages=10, seed="s"), clock)

    def status(name, path):
        request = DummyRequest([])
        request.path = path.encode()
        request.requestHeaders.setRawHeaders(b"host", [f"{name}:8000".encode()])
        body = resource.render(request)
        assert body, path
        return request.responseCode, request.responseHeaders.getRawHeaders(b"retry-after")

    news, blog = "news.fleet.test", "blog.fleet.test"
    clock.advance(5.0)
    assert status(news, "/busy/") == (200, None)  # the index never is busy, and opens no window
    assert status(news, "/busy/1.html") == (429, [str(BUSY_RETRY_AFTER).encode()])  # the first page opens it
    clock.advance(BUSY_SECONDS / 2)
    assert status(news, "/busy/2.html")[0] == 429
    assert status(blog, "/busy/2.html")[0] == 429  # every site has its own window, opened by its own first request
    clock.advance(BUSY_SECONDS / 2)
    assert status(news, "/busy/2.html") == (200, None)  # the window is over for good
    assert status(news, f"/busy/{BUSY_PAGES}.html")[0] == 200
    assert status(news, f"/busy/{BUSY_PAGES + 1}.html")[0] == 404
    assert status(blog, "/busy/1.html")[0] == 429
    assert status("hostile.fleet.test", "/busy/1.html")[0] == 404  # content sites only
    busy = resource.stats()[news]["busy"]
    assert (busy["first"], busy["until"], busy["retry_after"]) == (1005.0, 1005.0 + BUSY_SECONDS, BUSY_RETRY_AFTER)
    assert busy["answers"] == [[1005.0, "/busy/", 200], [1005.0, "/busy/1.html", 429],
                               [1005.0 + BUSY_SECONDS / 2, "/busy/2.html", 429],
                               [1005.0 + BUSY_SECONDS, "/busy/2.html", 200],
                               [1005.0 + BUSY_SECONDS, f"/busy/{BUSY_PAGES}.html", 200]]


def test_busy_area_pages_link_to_each_other_and_the_manifest_describes_them(demoweb):
    site = "trap.fleet.test"  # the e2e Retry-After test takes another site whose area nobody touched
    described = demoweb["manifest"]["sites"][site]["busy"]
    assert described["retry_after"] == BUSY_RETRY_AFTER and len(described["pages"]) == BUSY_PAGES + 1
    assert described["url"] == demoweb["urls"][site] + "busy/" == described["pages"][0]

    def get_site(path):
        return fetch(demoweb["sites"][site], demoweb["port"], site, path)

    status, _, index = get_site("/busy/")
    assert status == 200 and f"<h1 class=\"page-title\">{busy_title(0)}</h1>" in index.decode()
    linked = {urljoin(described["url"], href) for href in re.findall(r'href="(/busy/[^"]*)"', index.decode())}
    assert linked == set(described["pages"][1:])
    status, headers, _ = get_site("/busy/7.html")
    assert status == 429 and headers["retry-after"] == str(BUSY_RETRY_AFTER)

    # The window lasts BUSY_SECONDS on the server's clock: ask again until it is over (bounded, never a sleep).
    wait_for(lambda: get_site("/busy/7.html")[0] == 200, 15, "the busy window to end", interval=0.2)
    body = get_site("/busy/7.html")[2].decode()
    assert set(re.findall(r'href="(/busy/[^"]*)"', body)) == {"/busy/", "/busy/6.html", "/busy/8.html"}
    busy = json.loads(get_site(STATS_PATH)[2])[site]["busy"]
    assert busy["first"] is not None and busy["until"] == busy["first"] + BUSY_SECONDS
    sevens = [(when, status) for when, path, status in busy["answers"] if path == "/busy/7.html"]
    assert sevens[0] == (busy["first"], 429) and sevens[-1][1] == 200
    assert all(status == (429 if when < busy["until"] else 200) for when, status in sevens)

"""The hostile site of the demo web: pages that break naive crawlers, each with what a crawl should make of it.

``hostile.fleet.test`` has its own loopback address, like the content sites, but none of their features: it serves
an index, a few hostile pages and a bounded set of plain pages that its link farm points to.

| path | what | what a crawl should make of it |
|---|---|---|
| ``/huge`` | a 50 MiB HTML body | cut at the worker's download size limit; no item; the worker keeps running |
| ``/loop/a`` ↔ ``/loop/b`` | an endless 302 loop | given up after Scrapy's REDIRECT_MAX_TIMES; no item |
| ``/bomb.html`` | gzip bomb: about 1 MiB on the wire, 1 GiB of HTML inflated | decompression cut at the size limit |
| ``/lying.html`` | header says utf-8, body is GBK | decoded as gb18030 (the lie is dropped); its Chinese title |
| ``/broken.html`` | utf-8 with invalid byte sequences | decoded with U+FFFD replacements; its title intact |
| ``/links.html`` | 10,000 links to the 100 pages ``/pages/<n>.html`` | each page fetched once (dedup): a finite crawl |

The manifest (``hostile`` section, :meth:`HostileSite.describe`) says the same, in machine-readable form.

Large bodies are :class:`~deploy.demoweb.router.StreamReply` objects: the server writes them in 64 KiB pieces
as the client reads them (Twisted's pull producer), so a request for ``/huge`` costs a read position, not 50 MiB,
and one that leaves half-way costs nothing more. The gzip bomb is built once per process, on first request (about
0.35 s: the CRC of the inflated gibibyte), from two compressed mebibytes: a deflate block written after a full
flush refers to nothing before it, so one such block repeated 1023 times is a valid stream.
"""

from __future__ import annotations

import functools
import io
import random
import struct
import zlib
from dataclasses import dataclass
from html import escape
from typing import Any

from deploy.demoweb.router import Reply, StreamReply
from deploy.demoweb.sites import DOMAIN, base_url
from deploy.demoweb.text import CHINESE

HOSTILE_NAME = f"hostile.{DOMAIN}"
HOSTILE_IP = "127.0.0.15"
MIB = 1 << 20
HUGE_BYTES = 50 * MIB
BOMB_INFLATED_BYTES = 1024 * MIB
LINK_COUNT = 10_000
LINK_TARGETS = 100  # distinct pages the link farm points to: /pages/0.html … /pages/99.html
LYING_TITLE = "舰队新闻：页头声明与正文编码不符"
BROKEN_TITLE = "Broken bytes"
# Sequences no UTF-8 decoder accepts: a lone continuation byte, bytes never valid in UTF-8, a cut 3-byte sequence
# followed by ASCII, an overlong encoding of "/", and a UTF-16 surrogate encoded in UTF-8.
INVALID_SEQUENCES = (b"\x80", b"\xff\xfe", b"\xe4\xb8 ", b"\xc0\xaf", b"\xed\xa0\x80")

_HTML = "text/html; charset=utf-8"


class GeneratedBody:
    """A read-only file of ``length`` bytes: ``prefix``, then ``block`` repeated, then ``suffix``; made as it is read.

    It is what :class:`twisted.web.static.NoRangeStaticProducer` reads from (``read`` and ``close``).
    """

    def __init__(self, prefix: bytes, block: bytes, suffix: bytes, length: int) -> None:
        if length < len(prefix) + len(suffix) or not block:
            raise ValueError("the body must hold its prefix and suffix, and the block cannot be empty")
        self.prefix, self.block, self.suffix, self.length = prefix, block, suffix, length
        self.position = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        end = self.length if size is None or size < 0 else min(self.length, self.position + size)
        middle_end = self.length - len(self.suffix)
        out = bytearray()
        while self.position < end:
            position, want = self.position, end - self.position
            if position < len(self.prefix):
                piece = self.prefix[position:position + want]
            elif position >= middle_end:
                start = position - middle_end
                piece = self.suffix[start:start + want]
            else:
                start = (position - len(self.prefix)) % len(self.block)
                piece = self.block[start:start + min(want, middle_end - position)]
            out += piece
            self.position += len(piece)
        return bytes(out)

    def close(self) -> None:
        self.closed = True


def huge_body() -> GeneratedBody:
    """``/huge``: 50 MiB of paragraphs, a valid HTML page if anything reads it to the end."""
    prefix = b"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Huge page</title></head><body>\n"
    paragraph = b"<p>" + b"All work and no play makes a crawler a dull crawler. " * 19 + b"</p>\n"
    return GeneratedBody(prefix, paragraph, b"</body></html>\n", HUGE_BYTES)


@functools.cache
def gzip_bomb(inflated: int = BOMB_INFLATED_BYTES) -> bytes:
    """A gzip member that inflates to ``inflated`` bytes (a whole number of MiB) of HTML: mostly spaces."""
    if inflated % MIB or inflated < MIB:
        raise ValueError("the inflated size is a whole, positive number of MiB")
    head = b"<!DOCTYPE html>\n<html><head><title>Gzip bomb</title></head><body>"
    first, rest = head + b" " * (MIB - len(head)), b" " * MIB
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip framing is written here
    first_block = compressor.compress(first) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeated_block = compressor.compress(rest) + compressor.flush(zlib.Z_FULL_FLUSH)
    final_block = compressor.flush()
    crc = zlib.crc32(first)
    for _ in range(inflated // MIB - 1):
        crc = zlib.crc32(rest, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # magic, deflate, no flags, no mtime, best, unknown OS
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return b"".join((header, first_block, repeated_block * (inflated // MIB - 1), final_block, trailer))


def _page(title: str, body: str, charset: str = "utf-8") -> str:
    meta = f'<meta charset="{charset}">\n' if charset else ""
    return (f"<!DOCTYPE html>\n<html><head>\n{meta}<title>{escape(title)}</title>\n</head><body>\n"
            f"<h1>{escape(title)}</h1>\n{body}\n</body></html>\n")


def lying_page() -> bytes:
    """GBK bytes without a meta charset: only the (lying) HTTP header speaks, so a decoder must notice the lie."""
    rng = random.Random("crawlfleet:hostile:lying")
    paragraphs = "\n".join(f"<p>{escape(CHINESE.paragraph(rng))}</p>" for _ in range(6))
    return _page(LYING_TITLE, paragraphs, charset="").encode("gbk")


def broken_page() -> bytes:
    """A UTF-8 page (Chinese and accented text) with a few invalid sequences, as a corrupted template leaves them:
    detection still says UTF-8, so a careful decoder replaces only the bad bytes."""
    rng = random.Random("crawlfleet:hostile:broken")
    paragraphs = [f"<p>{escape(CHINESE.paragraph(rng))} ".encode() + bad + " café, naïve, Zürich.</p>".encode()
                  for bad in INVALID_SEQUENCES]
    return _page(BROKEN_TITLE, "{}").encode().replace(b"{}", b"\n".join(paragraphs))


def link_href(number: int, origin: str) -> str:
    """The ``number``-th link of the link farm: four spellings of the same 100 URLs (relative, rooted, absolute,
    with a fragment), so that only a crawler that canonicalises before it dedups stays at 100 fetches."""
    target = number % LINK_TARGETS
    spelling = (number // LINK_TARGETS) % 4
    return (f"/pages/{target}.html", f"pages/{target}.html", f"{origin}/pages/{target}.html",
            f"/pages/{target}.html#ref{number}")[spelling]


# path -> (what it is, what a crawl should make of it, whether the page gives an item)
PAGES: dict[str, tuple[str, str, bool]] = {
    "/huge": ("a 50 MiB HTML body (Content-Length says so)",
              "cut at the worker's download size limit (Scrapy DOWNLOAD_MAXSIZE; DOWNLOAD_WARNSIZE logs a "
              "warning); no item; the worker keeps running and the task completes", False),
    "/loop/a": ("302 to /loop/b, which redirects back here: an endless loop",
                "given up after Scrapy's REDIRECT_MAX_TIMES redirects; no item; the task completes", False),
    "/bomb.html": (f"gzip bomb: about 1 MiB on the wire, {BOMB_INFLATED_BYTES // MIB} MiB inflated "
                   "(Content-Encoding: gzip)",
                   "decompression cut at the download size limit (Scrapy's HttpCompressionMiddleware); "
                   "no item; memory stays bounded", False),
    "/lying.html": ("Content-Type says utf-8, the body is GBK (no meta charset)",
                    "decoded as gb18030 (the header's claim is dropped: the body is not UTF-8); an item whose "
                    "title is the Chinese title below", True),
    "/broken.html": ("declared utf-8, with invalid byte sequences in the text",
                     "decoded as utf-8 with U+FFFD replacements; an item whose title is intact", True),
    "/links.html": (f"{LINK_COUNT:,} links, four spellings of {LINK_TARGETS} pages /pages/<n>.html",
                    f"{LINK_TARGETS} distinct pages, each fetched once (dedup after canonicalisation): "
                    "a finite crawl", True),
}


@dataclass(frozen=True, eq=False)
class HostileSite:
    """The hostile site (see the module docstring). ``route`` answers every path of it."""

    name: str = HOSTILE_NAME
    ip: str = HOSTILE_IP
    articles: int = LINK_TARGETS  # its plain pages (the demo web's start-up log counts every site's pages)

    def route(self, path: str, origin: str) -> Reply | StreamReply:
        """The reply to ``path`` (query strings are ignored); unknown paths are 404."""
        if path == "/":
            return Reply(200, self._index(), _HTML)
        if path == "/robots.txt":
            return Reply(200, b"User-agent: *\nAllow: /\n", "text/plain; charset=utf-8")
        if path == "/huge":
            return StreamReply(200, _HTML, HUGE_BYTES, huge_body)
        if path in ("/loop/a", "/loop/b"):
            target = f"{origin}/loop/{'b' if path.endswith('a') else 'a'}"
            return Reply(302, f'<a href="{target}">Moved</a>\n'.encode(), _HTML, location=target)
        if path == "/bomb.html":
            bomb = gzip_bomb()
            return StreamReply(200, _HTML, len(bomb), lambda: _bytes_file(bomb),
                               headers=(("Content-Encoding", "gzip"),))
        if path == "/lying.html":
            return Reply(200, _lying(), _HTML)  # the lie: the body is GBK
        if path == "/broken.html":
            return Reply(200, _broken(), _HTML)
        if path == "/links.html":
            return Reply(200, _links(origin), _HTML)
        if (number := _page_number(path)) is not None:
            links = '<p><a href="/">Index</a> <a href="/links.html">Links</a></p>'
            return Reply(200, _page(f"Plain page {number}", links).encode(), _HTML)
        return Reply(404, _page("Not found", "<p>Nothing here.</p>").encode(), _HTML)

    def describe(self, port: int) -> dict[str, Any]:
        """The site's manifest entry: every hostile page, what it is and what a crawl should make of it."""
        url = base_url(self.name, port)
        pages = {path: {"url": url + path[1:], "what": what, "expect": expect, "item": item}
                 for path, (what, expect, item) in PAGES.items()}
        pages["/huge"]["bytes"] = HUGE_BYTES
        pages["/bomb.html"]["inflated_bytes"] = BOMB_INFLATED_BYTES
        pages["/lying.html"].update(title=LYING_TITLE, encoding="gb18030")
        pages["/broken.html"]["title"] = BROKEN_TITLE
        pages["/links.html"].update(links=LINK_COUNT, distinct=LINK_TARGETS)
        return {
            "ip": self.ip,
            "url": url,
            "pages": pages,
            "plain_pages": [f"{url}pages/{n}.html" for n in range(LINK_TARGETS)],
            # A crawl from the index that follows every link: one task per page (/loop/b is only reached inside the
            # redirects of /loop/a's task); with a rule that extracts every page, an item from each but the three
            # that cannot give one (/huge, /loop/a, /bomb.html).
            "tasks": 1 + len(PAGES) + LINK_TARGETS,
            "items": 1 + sum(item for _, _, item in PAGES.values()) + LINK_TARGETS,
        }

    @staticmethod
    def _index() -> bytes:
        rows = "\n".join(f'<li><a href="{path}">{escape(path)}</a>: {escape(what)}</li>'
                         for path, (what, _, _) in PAGES.items())
        return _page("Hostile pages", f"<ul>\n{rows}\n</ul>").encode()


def _page_number(path: str) -> int | None:
    if not (path.startswith("/pages/") and path.endswith(".html")):
        return None
    number = path[len("/pages/"):-len(".html")]
    if not number.isdigit() or (len(number) > 1 and number[0] == "0"):
        return None
    return int(number) if int(number) < LINK_TARGETS else None


def _bytes_file(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)  # shares ``data``'s buffer until written to (it never is)


@functools.cache
def _lying() -> bytes:
    return lying_page()


@functools.cache
def _broken() -> bytes:
    return broken_page()


@functools.cache
def _links(origin: str) -> bytes:
    items = "\n".join(f'<li><a href="{link_href(n, origin)}">link {n}</a></li>' for n in range(LINK_COUNT))
    return _page("Ten thousand links", f"<ul>\n{items}\n</ul>").encode()

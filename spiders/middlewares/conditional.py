"""Conditional requests and change detection for revisits: ``"spiders.middlewares.conditional.ConditionalMiddleware":
575`` in ``DOWNLOADER_MIDDLEWARES``.

Only tasks of crawls whose rule has ``revisit`` are touched (``frontier.revisit``):

- **request** — a revisit task carries what was stored at the page's last full fetch; its ETag goes out as
  ``If-None-Match`` and its Last-Modified as ``If-Modified-Since``, and the request accepts a 304;
- **304** to a conditional request — the page did not change: ``request.meta["revisit"]`` says ``not_modified``, and
  the spider yields nothing for it (no item, no link): the commit only moves the page's schedule;
- **2xx** — the digest of the page's *extracted main text* (``spiders.extraction``; not the raw HTML, whose ads,
  counters and timestamps change at every fetch) is compared with the stored one: the same is ``unchanged`` (handled
  like a 304), another is ``changed``, a first fetch is ``fetched``; the response's ETag, Last-Modified and digest go
  with it. A page whose main text is too short to be one (a bare list of links) is digested on its visible text
  instead, without scripts, navigation, asides, headers and footers, links' targets included;
- anything else that reaches here (404, 5xx after the retries) is ``failed``: the interval stays.

Order 575: responses go from high orders to low, so the body comes here decoded (``DecodeMiddleware``, 585).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from lxml import html as lxml_html
from scrapy import Request
from scrapy.http import Response, TextResponse

from frontier.revisit import CHANGED, FAILED, FETCHED, NOT_MODIFIED, UNCHANGED, RevisitPolicy
from spiders.extraction import extract

logger = logging.getLogger(__name__)
MIN_MAIN_TEXT = 200  # characters: shorter main text is no article; the whole visible text is digested
META_KEY = "revisit"


def digest_text(text: str) -> str:
    """The digest of a text, white space normalised."""
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8"), digest_size=16).hexdigest()


def page_digest(body: str, url: str) -> str:
    """The digest that decides whether a page changed (see the module docstring)."""
    try:
        text = extract(body, url=url).get("text") or ""
    except Exception as exc:  # an odd page: fall back to its visible text
        logger.debug("extraction failed on %s (%s)", url, exc)
        text = ""
    if len(text) >= MIN_MAIN_TEXT:
        return digest_text(text)
    try:
        root = lxml_html.fromstring(body)
    except Exception:
        return digest_text(body)
    for element in root.xpath("//script|//style|//noscript|//comment()|//nav|//aside|//header|//footer"):
        element.drop_tree()
    links = sorted(set(root.xpath("//a/@href")))
    return digest_text(root.text_content() + "\n" + "\n".join(links))


class ConditionalMiddleware:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> ConditionalMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        task = request.meta.get("task")
        if task is None or not getattr(task, "revisit", None) or self._policy(task) is None:
            return None
        etag, modified = task.revisit.get("etag"), task.revisit.get("last_modified")
        if etag:
            request.headers[b"If-None-Match"] = etag
        if modified:
            request.headers[b"If-Modified-Since"] = modified
        if etag or modified:
            request.meta["handle_httpstatus_list"] = [*request.meta.get("handle_httpstatus_list", []), 304]
        return None

    def process_response(self, request: Request, response: Response) -> Response:
        task = request.meta.get("task")
        if task is None or self._policy(task) is None:
            return response
        stored = getattr(task, "revisit", None) or {}
        outcome: dict[str, Any] = {"etag": _header(response, b"ETag") or stored.get("etag", ""),
                                   "last_modified": _header(response, b"Last-Modified")
                                   or stored.get("last_modified", ""),
                                   "previous_digest": stored.get("digest", "")}
        if response.status == 304 and (request.headers.get(b"If-None-Match")
                                       or request.headers.get(b"If-Modified-Since")):
            outcome.update(outcome=NOT_MODIFIED, digest=stored.get("digest", ""))
            self._count("not_modified")
        elif 200 <= response.status < 300 and isinstance(response, TextResponse):
            digest = page_digest(response.text, response.url)
            state = FETCHED if not stored else UNCHANGED if digest == stored.get("digest") else CHANGED
            outcome.update(outcome=state, digest=digest)
            self._count(state)
        else:
            outcome.update(outcome=FAILED, digest=stored.get("digest", ""))
            self._count(FAILED)
        request.meta[META_KEY] = outcome
        return response

    def _policy(self, task: Any) -> RevisitPolicy | None:
        crawl_for = getattr(self.crawler.spider, "crawl_for", None)  # a fleet spider's (spiders.spiders.base)
        crawl = crawl_for(task) if crawl_for is not None else None
        return RevisitPolicy.from_rule(crawl.rule) if crawl is not None else None

    def _count(self, outcome: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"fleet/revisit/{outcome}")


def unchanged(response: Any) -> bool:
    """Whether a response is a revisit that found the page as it was (the spider then yields nothing)."""
    outcome = (getattr(response, "meta", None) or {}).get(META_KEY) or {}
    return outcome.get("outcome") in (NOT_MODIFIED, UNCHANGED)


def _header(response: Response, name: bytes) -> str:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else ""

"""Decodes HTML before anything parses it: the spider gets an ``HtmlResponse`` whose body is UTF-8.

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.decode.DecodeMiddleware": 585}``. Scrapy trusts the declared
charset (header, then ``<meta>``), and the declaration often lies: a "gb2312" page written in GBK, a template that
says UTF-8 over a GBK body. Here :func:`spiders.encoding.decode_html` decides (BOM, header, meta charset, then
detection, gb2312/gbk read as gb18030; undecodable bytes become U+FFFD, never an exception) and the response is
replaced by an ``HtmlResponse`` with the text re-encoded as UTF-8, ``encoding="utf-8"`` and a Content-Type that says
so; the codec found goes into ``request.meta["page_encoding"]`` (``response.meta`` is the request's meta), from
which the spider fills the item's ``encoding``.

HTML means: an ``HtmlResponse`` or a Content-Type naming html/xhtml, or a text response (not XML) whose first KiB
starts like HTML (``<!doctype html``, ``<html``, ``<head``...). Anything else (XML sitemaps, JSON, images) passes
unchanged.

Order 585: responses travel from high orders to low, so the body arrives here after HttpCompressionMiddleware (590)
has decompressed it and after RedirectMiddleware (600) has followed redirects, and it is decoded before
MetaRefreshMiddleware (580) reads a ``<meta http-equiv="refresh">`` from it and before anything lower (the retries at
550/560, then the spider) sees it.
"""

from __future__ import annotations

import re
from typing import Any

from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse

from spiders.encoding import decode_html

SNIFF_BYTES = 1024
# How an HTML document starts (a subset of the WHATWG sniffing table): after a BOM, white space and comments.
_HTML_START = re.compile(rb"(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title)[\s>/]",
                         re.IGNORECASE | re.DOTALL)


def _header(response: Response, name: bytes) -> str:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else ""


def is_html(response: Response, content_type: str) -> bool:
    mime = content_type.split(";", 1)[0].strip().lower()
    if isinstance(response, HtmlResponse) or mime in ("text/html", "application/xhtml+xml"):
        return True
    if isinstance(response, TextResponse) and not isinstance(response, XmlResponse):
        return bool(_HTML_START.match(response.body[:SNIFF_BYTES]))
    return False


class DecodeMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Any) -> DecodeMiddleware:
        return cls()

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        content_type = _header(response, b"Content-Type")
        if not is_html(response, content_type):
            return response
        try:
            text, codec = decode_html(response.body, content_type or None)
        except Exception:  # decode_html is meant never to raise; a page must not be lost if it ever does
            text, codec = response.body.decode("utf-8", "replace"), "utf-8"
        request.meta["page_encoding"] = codec
        mime = content_type.split(";", 1)[0].strip()
        mime = mime if "html" in mime.lower() else "text/html"  # a sniffed page may have come as text/plain
        headers = response.headers.copy()
        headers[b"Content-Type"] = f"{mime}; charset=utf-8"
        return response.replace(cls=HtmlResponse, body=text.encode("utf-8", "replace"), encoding="utf-8",
                                headers=headers)

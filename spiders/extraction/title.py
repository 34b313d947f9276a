"""The article's title: the page's headline, without the site name that ``<title>`` usually carries."""

from __future__ import annotations

import re

from lxml import etree

__all__ = ["find_title"]

# "Headline - Site", "Site | Section | Headline", "标题_新闻_网站": split the <title> on these.
_SEPARATORS = re.compile(r"\s+[|\-–—:»·•]\s+|\s*[|_]\s*|\s*[-–—]{2,}\s*|\s+::\s+")
_META_TITLES = (
    ("property", "og:title"),
    ("name", "twitter:title"),
    ("property", "twitter:title"),
    ("itemprop", "headline"),
    ("name", "title"),
)


def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


def _meta(root: etree._Element, attribute: str, value: str) -> str:
    for element in root.iterfind(f".//meta[@{attribute}]"):
        if (element.get(attribute) or "").strip().lower() == value:
            return _clean(element.get("content"))
    return ""


def _similar(a: str, b: str) -> bool:
    """Same headline up to decoration: one contains the other, or they share most of their characters."""
    if not a or not b:
        return False
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) < max(4, 0.3 * len(longer)):  # "News" is in every title: too short to confirm anything
        return False
    if shorter in longer:
        return True
    common = sum(1 for ch in set(shorter) if ch in longer)
    return common >= 0.8 * len(set(shorter)) and len(shorter) >= 0.6 * len(longer)


def _strip_site_name(title: str) -> str:
    """Keep the longest part of a separated ``<title>``: headlines are longer than site and section names."""
    parts = [p for p in (_clean(p) for p in _SEPARATORS.split(title)) if p]
    return max(parts, key=len) if len(parts) > 1 else title


def find_title(root: etree._Element | None) -> str:
    """Best headline for the page: an ``<h1>`` confirmed by ``<title>``/og:title, else og:title, else a cleaned
    ``<title>``, else the first ``<h1>``; empty string when the page has none."""
    if root is None:
        return ""
    document_title = ""
    for element in root.iterfind(".//title"):
        document_title = _clean(element.text)
        break
    meta_title = next((t for t in (_meta(root, a, v) for a, v in _META_TITLES) if t), "")
    headings = [_clean("".join(h.itertext())) for tag in ("h1", "h2") for h in root.iterfind(f".//{tag}")]
    headings = [h for h in headings if 2 <= len(h) <= 300]
    for heading in headings:
        if _similar(heading, meta_title) or _similar(heading, document_title):
            return heading
    if meta_title:
        return _strip_site_name(meta_title) if _SEPARATORS.search(meta_title) and document_title else meta_title
    if document_title:
        return _strip_site_name(document_title)
    return headings[0] if headings else ""

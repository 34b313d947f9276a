"""The article's title: the page's headline, without the site name that ``<title>`` usually carries."""

from __future__ import annotations

import re
from collections.abc import Sequence

from selectolax.lexbor import LexborHTMLParser, LexborNode

from spiders.extraction.markup import WORDS

__all__ = ["TITLE_SELECTOR", "find_title"]

# What the title is read from (one pass over the tree, in C).
TITLE_SELECTOR = "title, h1, h2, meta[content]"

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


def _meta_titles(metas: list[dict[str, str | None]]) -> str:
    """The first non-empty title among the ``<meta>`` tags (their attributes) of ``_META_TITLES``, in that order
    of trust."""
    found: dict[tuple[str, str], str] = {}
    for attributes in metas:
        for attribute, value in _META_TITLES:
            key = (attribute, value)
            if key not in found and (attributes.get(attribute) or "").strip().lower() == value:
                found[key] = _clean(attributes.get("content"))
    return next((found[key] for key in _META_TITLES if found.get(key)), "")


def _similar(a: str, b: str, by_words: bool = False) -> bool:
    """Same headline up to decoration: one contains the other, or they share most of their characters (of
    their words with ``by_words``)."""
    if not a or not b:
        return False
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) < max(4, 0.3 * len(longer)):  # "News" is in every title: too short to confirm anything
        return False
    if shorter in longer:
        return True
    if len(shorter) < 0.6 * len(longer):
        return False
    if by_words:
        # Most of the shorter one's words (each CJK character a word) are in the longer one. A set of letters
        # confirms any two English sentences of similar length: a landing page's section heading "A unified
        # inference cloud to build full-stack AI apps" would anchor the "article" under <title> "DigitalOcean:
        # AI-Powered Unified Inference Cloud Infrastructure".
        words, others = set(WORDS.findall(shorter.lower())), set(WORDS.findall(longer.lower()))
        return len(words & others) >= 0.8 * len(words)
    common = sum(1 for ch in set(shorter) if ch in longer)
    return common >= 0.8 * len(set(shorter))


def _strip_site_name(title: str) -> str:
    """Keep the longest part of a separated ``<title>``: headlines are longer than site and section names."""
    parts = [p for p in (_clean(p) for p in _SEPARATORS.split(title)) if p]
    return max(parts, key=len) if len(parts) > 1 else title


def find_title(document: LexborHTMLParser | None, found: Sequence[LexborNode] | None = None) -> str:
    """Best headline for the page: an ``<h1>`` (or ``<h2>``, by its words) confirmed by ``<title>``/og:title, else
    og:title, else a cleaned ``<title>``, else the first ``<h1>``; empty string when the page has none.

    ``found``: the document's elements matching a selector list that holds ``TITLE_SELECTOR`` (in document order),
    when a caller's one query serves other readers too; others among them are ignored."""
    if document is None:
        return ""
    document_title, metas, h1, h2 = None, [], [], []
    for element in document.css(TITLE_SELECTOR) if found is None else found:
        tag = element.tag
        if tag == "meta":
            metas.append(element.attributes)
        elif tag == "h1":
            h1.append(element)
        elif tag == "h2":
            h2.append(element)
        elif document_title is None and tag == "title":
            document_title = _clean(element.text())
    document_title = document_title or ""
    meta_title = _meta_titles(metas)
    # An <h1> is the page's own headline: a loose likeness to <title> confirms it. An <h2> is most often a section
    # heading, and must share most of its words with the title.
    headings = [(_clean(h.text()), False) for h in h1] + [(_clean(h.text()), True) for h in h2]
    headings = [(h, second) for h, second in headings if 2 <= len(h) <= 300]
    for heading, second in headings:
        if _similar(heading, meta_title, second) or _similar(heading, document_title, second):
            return heading
    if meta_title:
        return _strip_site_name(meta_title) if _SEPARATORS.search(meta_title) and document_title else meta_title
    if document_title:
        return _strip_site_name(document_title)
    return headings[0][0] if headings else ""

"""The publication date: from machine-readable metadata first, else from a date written near the headline.

Returned as an ISO 8601 string: ``YYYY-MM-DD``, or ``YYYY-MM-DDTHH:MM[:SS][±HH:MM]`` when a time is given.
Dates that cannot be real (month 13, the year 1200, more than a day in the future) are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = ["DATES_SELECTOR", "find_published", "parse_date"]

# What the metadata date is read from first (one pass over the tree, in C).
DATES_SELECTOR = "meta[content], time[datetime]"

# Meta names (lower-case) that carry the publication date, most trustworthy first.
_META_NAMES = (
    "article:published_time",
    "og:published_time",
    "datepublished",
    "publishdate",
    "publish-date",
    "pubdate",
    "publication_date",
    "sailthru.date",
    "parsely-pub-date",
    "dc.date.issued",
    "dcterms.created",
    "dc.date",
    "date",
)
_JSON_LD_DATE = re.compile(r'"datePublished"\s*:\s*"([^"]{6,40})"')

# 2011-06-03 14:20, 2011/6/3, 2011.06.03, 2011年6月3日 14:20:05, 2011-06-03T14:20:00+08:00
_NUMERIC_DATE = re.compile(
    r"(?<!\d)((?:19|20)\d\d)\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?"
    r"(?:[T\s]*(\d{1,2})[:：时](\d{2})(?:[:：分](\d{2}))?)?"
    r"(?:\s*(Z|[+-]\d\d:?\d\d))?(?!\d)"
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "jan january",
            "feb february",
            "mar march",
            "apr april",
            "may",
            "jun june",
            "jul july",
            "aug august",
            "sep sept september",
            "oct october",
            "nov november",
            "dec december",
        ),
        start=1,
    )
    for name in names.split()
}
# "June 3, 2011", "3 June 2011", "Jun. 3 2011"
_WORD_DATE = re.compile(
    r"\b(?:(\d{1,2})\s+([A-Za-z]{3,9})\.?,?\s+((?:19|20)\d\d)|([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"((?:19|20)\d\d))\b"
)


def _iso(year: int, month: int, day: int, hour=None, minute=None, second=None, offset=None) -> str | None:
    try:
        moment = datetime(year, month, day, int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:
        return None
    if not year >= 1990 or moment > datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1):
        return None
    if hour is None:
        return moment.date().isoformat()
    text = moment.isoformat(timespec="seconds" if second else "minutes")
    if offset:
        text += "+00:00" if offset == "Z" else f"{offset[:3]}:{offset[-2:]}"
    return text


def parse_date(text: str) -> str | None:
    """The first plausible date in ``text`` as ISO 8601, or None."""
    if not text:
        return None
    for match in _NUMERIC_DATE.finditer(text):
        year, month, day, hour, minute, second, offset = match.groups()
        iso = _iso(int(year), int(month), int(day), hour, minute, second, offset)
        if iso:
            return iso
    for match in _WORD_DATE.finditer(text):
        day, month_name, year = (match.group(1), match.group(2), match.group(3))
        if day is None:
            month_name, day, year = match.group(4), match.group(5), match.group(6)
        month = _MONTHS.get(month_name.lower().rstrip("."))
        if month:
            iso = _iso(int(year), month, int(day))
            if iso:
                return iso
    return None


_DATED_TAGS = frozenset(("meta", "time"))  # the tags DATES_SELECTOR matches
_ITEMPROP_DATE = re.compile(r"""itemprop\s*=\s*["']?datePublished""", re.IGNORECASE)


def _from_metadata(document: LexborHTMLParser, source: str | None, found: Sequence[LexborNode] | None) -> str | None:
    metas: dict[str, str] = {}
    times = []
    for element in document.css(DATES_SELECTOR) if found is None else found:
        if found is not None and element.tag not in _DATED_TAGS:  # matched by another reader's selector
            continue
        attributes = element.attributes
        if "content" not in attributes:
            times.append(attributes)
            continue
        key = (attributes.get("property") or attributes.get("name") or attributes.get("itemprop") or "").strip().lower()
        if key in _META_NAMES and key not in metas:
            metas[key] = attributes.get("content") or ""
    for key in _META_NAMES:
        if key in metas and (iso := parse_date(metas[key])):
            return iso
    # Microdata and JSON-LD both spell "datePublished": when the source has no such word (most pages), skip the
    # two searches.
    if source is None or "atePublished" in source or "atepublished" in source:
        for script in document.css('script[type*="ld+json" i]'):
            match = _JSON_LD_DATE.search(script.text())
            if match and (iso := parse_date(match.group(1))):
                return iso
        itemprop = source is None or _ITEMPROP_DATE.search(source)
        for element in document.css("[itemprop]") if itemprop else ():
            attributes = element.attributes
            if (attributes.get("itemprop") or "").lower() == "datepublished":
                value = attributes.get("content") or attributes.get("datetime") or element.text()
                if iso := parse_date(value):
                    return iso
    for attributes in times:
        if iso := parse_date(attributes.get("datetime") or ""):
            return iso
    return None


def find_published(
    document: LexborHTMLParser | None,
    nearby_text: Sequence[str] = (),
    source: str | None = None,
    found: Sequence[LexborNode] | None = None,
) -> str | None:
    """Publication date from metadata, else from ``nearby_text`` (lines around the headline), else None.

    ``source``, the HTML the document was parsed from, lets the search skip what the page cannot hold. ``found``:
    the document's elements matching a selector list that holds ``DATES_SELECTOR`` (in document order), when a
    caller's one query serves other readers too (the title's); others among them are ignored."""
    if document is not None:
        try:
            iso = _from_metadata(document, source, found)
        except (ValueError, json.JSONDecodeError):
            iso = None
        if iso:
            return iso
    for line in nearby_text:
        if iso := parse_date(line):
            return iso
    return None

"""Where a linked heading points: to another page of the same site (a teaser) or elsewhere.

A list of teasers after a story links each heading to another page of the site (``/incidents/507686050.html``).
A round-up's product headings link to shops (``amazon.com``, ``amzn.to``), an ad's to its network, and a
documentation page's headings to themselves (``#multi-host-networking``, a permalink): none of them ends the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from messaging.domains import InvalidDomain, domain_of
from spiders.extraction.dom import Tree

# The page's own address when the caller gives none: its canonical link or og:url, in the source's <head>.
_SELF = re.compile(r"<(?:link\b[^>]*?\brel\s*=\s*[\"']?canonical\b|meta\b[^>]*?\bproperty\s*=\s*[\"']?og:url\b)", re.I)
_ADDRESS = re.compile(r"\b(?:href|content)\s*=\s*[\"']?(https?://[^\"'\s>]+)", re.I)
_HEAD_CHARS = 200_000  # the <head> of the largest dev pages ends before this

# The page's registrable domain or None, looked up only when a rule needs it (the search costs 0.1 ms).
Site = Callable[[], str | None]


def unknown_site() -> None:
    """The site of a page whose address is unknown."""
    return None


def _own_addresses(html: str) -> list[str]:
    """The canonical link's and og:url's addresses (found by substring search: a regex over the whole source
    would cost a fifth of the extraction)."""
    addresses: list[str] = []
    for marker in ("canonical", "og:url"):
        at = html.find(marker, 0, _HEAD_CHARS)
        while at >= 0 and len(addresses) < 4:
            tag = html[html.rfind("<", 0, at) : html.find(">", at) + 1]
            if _SELF.match(tag) and (found := _ADDRESS.search(tag)):
                addresses.append(found.group(1))
            at = html.find(marker, at + len(marker), _HEAD_CHARS)
    return addresses


def page_site(html: str, url: str | None) -> str | None:
    """The registrable domain of the page (``url`` first, else its canonical link or og:url); None if unknown."""
    for address in [url] if url else _own_addresses(html):
        try:
            return domain_of(address)
        except InvalidDomain:
            continue
    return None


def _points_here(href: str, site: str | None) -> bool:
    """Whether a link leads to another page of the site: relative links do; absolute ones when their host is the
    page's registrable domain or under it (or when that is unknown); in-page anchors and other schemes do not.
    A host's own domain is never looked up: one suffix test per link, whatever the number of distinct hosts."""
    href = href.strip()
    if not href or href.startswith("#"):
        return False
    lowered = href[:12].lower()
    if lowered.startswith(("http://", "https://", "//")):
        if site is None:
            return True
        try:
            host = (urlsplit(href).hostname or "").rstrip(".")
        except ValueError:
            return False
        return host == site or host.endswith("." + site)
    return ":" not in href.split("/", 1)[0]  # mailto:, javascript:, tel: are not pages


def links_elsewhere(tree: Tree, element: int, site: str | None) -> bool:
    """Whether the links in (or around) a heading element all point off the site or within the page."""
    nodes = tree.nodes
    anchors = [nodes[i] for i in range(element, tree.end[element]) if nodes[i].tag == "a"]
    parent, levels = tree.parent[element], 0
    while not anchors and parent >= 0 and levels < 3:  # <a class="card"><h3>…</h3></a>
        if nodes[parent].tag == "a":
            anchors.append(nodes[parent])
        parent, levels = tree.parent[parent], levels + 1
    hrefs = [anchor.attributes.get("href") or "" for anchor in anchors]
    return bool(hrefs) and not any(_points_here(href, site) for href in hrefs)

"""A page's structured metadata, normalised: JSON-LD, microdata (extruct), OpenGraph and Twitter cards.

:func:`page_metadata` returns one flat dict (keys only when the page has a value)::

    {"title", "description", "author": [...], "published", "modified", "section", "language", "canonical", "image",
     "type", "site_name", "keywords": [...],
     "product": {"name", "price", "currency", "availability", "brand", "sku"}}

Sources, most authoritative first: the page's main JSON-LD entity (an article or a product; ``@graph`` searched),
microdata read by extruct (only on pages saying ``itemscope``: it needs a second, lxml parse), OpenGraph and its
``article:``/``product:`` properties, Twitter cards, then the plain head (``<title>``, ``<meta name=author>``,
``<link rel=canonical>``, ``<html lang>``). The head is read with lexbor (selectolax) in one CSS query, from the
extraction's own parse of the page when the caller hands it over (``document``: read before the extraction prunes
it, so a page is parsed once for both; :func:`spiders.pipelines.pageproc.page_work`).

Bounded and forgiving: at most ``MAX_BLOCKS`` JSON-LD blocks of ``MAX_BLOCK_CHARS`` each are read, every string is
cut to ``MAX_VALUE_CHARS``, lists to ``MAX_LIST``; a block that is not JSON (extruct's own leniency first: comment
lines, control characters) is skipped and counted in ``broken``, never failing the page.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

__all__ = ["MAX_BLOCKS", "MAX_BLOCK_CHARS", "MAX_LIST", "MAX_VALUE_CHARS", "page_metadata"]

MAX_BLOCKS = 32
MAX_BLOCK_CHARS = 512 * 1024
MAX_VALUE_CHARS = 2000
MAX_LIST = 10
_MAX_NODES = 500  # JSON-LD nodes visited per page
_ARTICLE_TYPES = frozenset(("article", "newsarticle", "blogposting", "reportagenewsarticle", "analysisnewsarticle",
                            "opinionnewsarticle", "techarticle", "scholarlyarticle", "report", "liveblogposting",
                            "discussionforumposting", "socialmediaposting", "review", "recipe", "howto", "qapage",
                            "videoobject", "event", "jobposting"))
_PAGE_TYPES = frozenset(("webpage", "itempage", "collectionpage", "aboutpage", "profilepage", "searchresultspage"))
_PRODUCT_TYPES = frozenset(("product", "productgroup", "vehicle", "book", "individualproduct", "productmodel"))
_HEAD_QUERY = "html, title, meta, link[rel], script[type]"


def _clip(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = " ".join(value.split())
    return value[:MAX_VALUE_CHARS] or None


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("@type")
    kinds = kind if isinstance(kind, list) else [kind]
    return {k.rsplit("/", 1)[-1].lower() for k in kinds if isinstance(k, str)}


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _text(value: Any) -> str | None:
    """A string from a JSON-LD value: itself, the first of a list, or a node's ``name``/``@value``/``url``."""
    value = _first(value)
    if isinstance(value, dict):
        value = value.get("name") or value.get("@value") or value.get("url") or value.get("@id")
        value = _first(value)
    return _clip(value)


def _names(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    names = [name for name in (_text(v) for v in values[: 4 * MAX_LIST]) if name]
    return list(dict.fromkeys(names))[:MAX_LIST]


def _decode_block(script: str) -> Any:
    """A JSON-LD block as extruct reads it: strict JSON, else without comment lines (jstyleson)."""
    try:
        return json.loads(script, strict=False)
    except ValueError:
        import jstyleson
        from extruct.jsonld import HTML_OR_JS_COMMENTLINE

        return jstyleson.loads(HTML_OR_JS_COMMENTLINE.sub("", script), strict=False)


def _nodes(data: Any) -> list[dict[str, Any]]:
    """Every JSON-LD node of a block (``@graph`` and nested values), breadth first, bounded."""
    found: list[dict[str, Any]] = []
    queue = [data]
    while queue and len(found) < _MAX_NODES:
        value = queue.pop(0)
        if isinstance(value, list):
            queue.extend(value[:_MAX_NODES])
        elif isinstance(value, dict):
            found.append(value)
            for key in ("@graph", "mainEntity", "mainEntityOfPage", "itemListElement", "subjectOf"):
                nested = value.get(key)
                if isinstance(nested, list | dict):
                    queue.append(nested)
    return found


def _main_entities(nodes: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The page's main article-like node (else a WebPage) and its product node, if any."""
    article = page = product = None
    for node in nodes:
        kinds = _types(node)
        if article is None and kinds & _ARTICLE_TYPES:
            article = node
        elif page is None and kinds & _PAGE_TYPES:
            page = node
        if product is None and kinds & _PRODUCT_TYPES:
            product = node
    return article or page, product


def _offer(product: dict[str, Any]) -> dict[str, Any]:
    offers = _first(product.get("offers"))
    if isinstance(offers, dict) and not offers.get("price") and isinstance(offers.get("offers"), list | dict):
        offers = _first(offers["offers"])  # an AggregateOffer listing its offers
    return offers if isinstance(offers, dict) else {}


def _availability(value: Any) -> str | None:
    text = _text(value)
    return text.rsplit("/", 1)[-1] if text else None


def _product_fields(product: dict[str, Any]) -> dict[str, str]:
    offer = _offer(product)
    price = offer.get("price") or offer.get("lowPrice")
    spec = _first(offer.get("priceSpecification"))
    if price is None and isinstance(spec, dict):
        price = spec.get("price")
    fields = {
        "name": _text(product.get("name")),
        "price": _clip(price),
        "currency": _clip(offer.get("priceCurrency") or (spec.get("priceCurrency") if isinstance(spec, dict)
                                                         else None)),
        "availability": _availability(offer.get("availability")),
        "brand": _text(product.get("brand")),
        "sku": _text(product.get("sku")),
    }
    return {key: value for key, value in fields.items() if value}


class _Head:
    """What the document's head (and ``<html>``) says: meta properties, links, title, language, JSON-LD."""

    def __init__(self, html: str, document: LexborHTMLParser | None = None) -> None:
        self.meta: dict[str, str] = {}
        self.title = self.canonical = self.lang = None
        self.scripts: list[str] = []
        if document is None:
            document = LexborHTMLParser(html)
        for node in document.css(_HEAD_QUERY):
            tag, attributes = node.tag, node.attributes
            if tag == "meta":
                key = (attributes.get("property") or attributes.get("name") or attributes.get("itemprop") or "")
                content = attributes.get("content")
                key = key.strip().lower()
                if key and content and key not in self.meta and len(self.meta) < 500:
                    self.meta[key] = content
            elif tag == "link":
                if self.canonical is None and "canonical" in (attributes.get("rel") or "").lower().split():
                    self.canonical = attributes.get("href")
            elif tag == "title":
                if self.title is None:
                    self.title = node.text()
            elif tag == "html":
                self.lang = self.lang or attributes.get("lang") or attributes.get("xml:lang")
            elif ((attributes.get("type") or "").strip().lower() == "application/ld+json"
                  and len(self.scripts) < MAX_BLOCKS):
                self.scripts.append(node.text(deep=True))


def _microdata(html: str, url: str | None) -> list[dict[str, Any]]:
    """Microdata items as JSON-LD-like nodes (extruct's uniform form: ``@type`` and properties)."""
    import extruct

    found = extruct.extract(html, base_url=url, syntaxes=["microdata"], uniform=True, errors="ignore")
    return [item for item in found.get("microdata", []) if isinstance(item, dict)]


def page_metadata(html: str, url: str | None = None,
                  document: LexborHTMLParser | None = None) -> tuple[dict[str, Any], int]:
    """The page's metadata (see the module docstring) and the number of broken JSON-LD blocks skipped.
    ``document``: ``html`` already parsed (:func:`spiders.extraction.parse.parse_html`) and not yet pruned."""
    head = _Head(html, document)
    broken = 0
    nodes: list[dict[str, Any]] = []
    for script in head.scripts:
        if len(script) > MAX_BLOCK_CHARS:
            broken += 1
            continue
        try:
            nodes.extend(_nodes(_decode_block(script)))
        except Exception:  # any failure of one block (bad JSON, jstyleson's own errors) skips that block only
            broken += 1
    if "itemscope" in html:
        try:
            nodes.extend(node for item in _microdata(html, url) for node in _nodes(item))
        except Exception:
            broken += 1
    main, product = _main_entities(nodes)
    main = main or {}
    meta = head.meta

    def pick(*values: Any) -> str | None:
        for value in values:
            text = _text(value)
            if text:
                return text
        return None

    metadata: dict[str, Any] = {
        "title": pick(meta.get("og:title"), meta.get("twitter:title"), main.get("headline"), main.get("name"),
                      head.title),
        "description": pick(meta.get("og:description"), meta.get("twitter:description"), main.get("description"),
                            meta.get("description")),
        "published": pick(main.get("datePublished"), meta.get("article:published_time"),
                          meta.get("datepublished"), main.get("dateCreated")),
        "modified": pick(main.get("dateModified"), meta.get("article:modified_time"), meta.get("og:updated_time"),
                         meta.get("datemodified")),
        "section": pick(main.get("articleSection"), meta.get("article:section")),
        "language": _language(pick(main.get("inLanguage"), head.lang, meta.get("og:locale"))),
        "canonical": _absolute(pick(head.canonical, meta.get("og:url"), main.get("url")), url),
        "image": _absolute(pick(meta.get("og:image"), meta.get("og:image:url"), meta.get("twitter:image"),
                                main.get("image"), main.get("thumbnailUrl")), url),
        "type": pick(meta.get("og:type"), main.get("@type")),
        "site_name": pick(meta.get("og:site_name"), main.get("publisher")),
    }
    authors = _names(main.get("author")) or _names(meta.get("author")) or _names(meta.get("article:author"))
    if authors:
        metadata["author"] = authors
    keywords = main.get("keywords") or meta.get("keywords")
    if isinstance(keywords, str):
        keywords = keywords.split(",")
    if isinstance(keywords, list):
        cleaned = list(dict.fromkeys(k for k in (_clip(w) for w in keywords[: 4 * MAX_LIST]) if k))[:MAX_LIST]
        if cleaned:
            metadata["keywords"] = cleaned
    shop: dict[str, str | None] = dict(_product_fields(product)) if product else {}
    for key, meta_key in (("price", "product:price:amount"), ("currency", "product:price:currency"),
                          ("availability", "product:availability")):
        if key not in shop and meta.get(meta_key) and (product or meta.get("og:type", "").startswith("product")):
            shop[key] = _clip(meta[meta_key])
    if shop:
        shop.setdefault("name", metadata["title"])
        metadata["product"] = {key: value for key, value in shop.items() if value}
    return {key: value for key, value in metadata.items() if value}, broken


_LOCALE = re.compile(r"^([A-Za-z]{2,3})(?:[_-]([A-Za-z0-9]{2,8}))?")


def _language(value: str | None) -> str | None:
    """A BCP 47 tag from ``en_US``, ``en-us``, ``zh-CN``: language lower case, region upper case."""
    if not value:
        return None
    match = _LOCALE.match(value.strip())
    if match is None:
        return None
    language, region = match.group(1).lower(), match.group(2)
    return f"{language}-{region.upper() if len(region) == 2 else region}" if region else language


def _absolute(value: str | None, base: str | None) -> str | None:
    if not value or not base:
        return value
    try:
        return urljoin(base, value)[:MAX_VALUE_CHARS]
    except ValueError:
        return value

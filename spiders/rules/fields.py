"""What the two rule-driven spiders share: compiled user XPaths, field values, link URLs and the page result.

A crawl's rule is turned into objects once (``ListRule.from_json``, ``UniversalRule.from_json``) and applied to
thousands of pages, so every user XPath is compiled here once, as an lxml :class:`~lxml.etree.XPath` with the EXSLT
``re:`` and ``set:`` prefixes that parsel (and the rule schema's ``xpath`` format) allow; parsel's ``has-class()``
is registered globally by parsel itself. Per page, a compiled XPath runs straight on the lxml tree of the response's
parsel selector (built once per response by Scrapy, and shared with the spider's other users of ``response.xpath``).

A field's value is the first *non-empty* result of its XPath, stripped: an element gives its text content with
whitespace normalised, an attribute or text node its value, a string/number/boolean expression its XPath string
value. Nothing found means the field is absent, never ``""`` or ``None``. A link XPath (the list spider's
``second_page_url`` and ``next_page``) accepts the ``href`` (or ``src``) of a selected element as well, because
users write ``//a[@class='next']`` as often as ``//a[@class='next']/@href``.

Users write the XPaths and pages are hostile, so evaluation never raises: a failure (undefined variable, unknown
function, a bad regular expression inside ``re:test``, libxml2's recursion limits on deeply nested markup) becomes
one line in :attr:`PageResult.errors`, which the spider logs and counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin

from lxml import etree
from scrapy.http import Response, TextResponse
from scrapy.utils.misc import rel_has_nofollow
from scrapy.utils.response import get_base_url
from w3lib.url import safe_url_string

from messaging.validation import EXSLT_NAMESPACES
from spiders.xpaths import ReusedXPath

FOLLOWED_SCHEMES = ("http://", "https://")
_TEXT_CONTENT = ReusedXPath("string()")  # evaluated on every value: its error log bounded
_LINK_ATTRIBUTES = ("href", "src")


class RuleError(ValueError):
    """A rule that cannot be built (it should have been refused by the rule's JSON Schema)."""


@dataclass(frozen=True)
class Link:
    """A child page to crawl: its absolute URL (no fragment), which kind of page it is, and what it carries."""

    url: str
    callback: str  # list spider: "list" | "detail"; universal spider: "rule:<i>" | "sitemap"
    meta: dict[str, Any] = field(default_factory=dict, hash=False)  # hashable by URL and callback


@dataclass
class PageResult:
    """What a rule made of one page: items (user fields only), links to follow, and rule failures."""

    items: list[dict[str, Any]] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    nofollow: int = 0  # links left out because the page marks them rel="nofollow"


class FieldXPath:
    """One user XPath, compiled once (again every few thousand pages, :mod:`spiders.xpaths`: lxml's error log of an
    evaluator only grows); ``name`` says where it comes from in the rule, for error messages."""

    __slots__ = ("_xpath", "name", "source")

    def __init__(self, name: str, source: str):
        self.name = name
        self.source = source
        try:
            self._xpath = ReusedXPath(source, EXSLT_NAMESPACES)
        except etree.XPathError as exc:
            raise RuleError(f"{name}: {source!r} is not a valid XPath: {exc}") from exc

    def evaluate(self, node: etree._Element, errors: list[str]) -> list[Any]:
        """The XPath's results with ``node`` as context (a scalar result becomes a one-item list); [] on failure."""
        try:
            result = self._xpath(node)
        # The user's expression is the only code running here, and lxml lets the errors of extension functions
        # through unchanged (re.error from re:test, ValueError from has-class): any exception is the rule's fault.
        except Exception as exc:
            errors.append(f"{self.name}: XPath {self.source!r} failed: {type(exc).__name__}: {exc}")
            return []
        return result if isinstance(result, list) else [result]

    def first_value(self, node: etree._Element, errors: list[str]) -> str | None:
        return first_value(self.evaluate(node, errors))


def value_of(result: Any) -> str | None:
    """The stripped string value of one XPath result, or None when it is empty."""
    if isinstance(result, etree._Element):
        text = " ".join(_TEXT_CONTENT(result).split())
    elif isinstance(result, str):  # attribute values, text nodes, string() results
        text = result.strip()
    elif isinstance(result, bool):
        text = "true" if result else "false"
    elif isinstance(result, float):
        if math.isnan(result):
            return None
        text = str(int(result)) if result.is_integer() else repr(result)
    else:
        text = str(result).strip()
    return text or None


def first_value(results: Iterable[Any]) -> str | None:
    for result in results:
        text = value_of(result)
        if text is not None:
            return text
    return None


def rel_nofollow(result: Any) -> bool:
    """Whether an XPath result is (or is an attribute or text of) an element whose ``rel`` says ``nofollow``."""
    element = result if isinstance(result, etree._Element) else getattr(result, "getparent", lambda: None)()
    return isinstance(element, etree._Element) and rel_has_nofollow(element.get("rel"))


def link_values(results: Iterable[Any], obey_nofollow: bool = False, page: PageResult | None = None) -> list[str]:
    """Every non-empty link value of XPath results: an element gives its href (or src), else its text. With
    ``obey_nofollow``, links marked ``rel="nofollow"`` are left out (counted in ``page.nofollow``)."""
    values = []
    for result in results:
        if obey_nofollow and rel_nofollow(result):
            if page is not None:
                page.nofollow += 1
            continue
        if isinstance(result, etree._Element):
            attribute = next((result.get(name) for name in _LINK_ATTRIBUTES if result.get(name)), None)
            text = attribute.strip() if attribute is not None else value_of(result)
        else:
            text = value_of(result)
        if text:
            values.append(text)
    return values


class FieldSet:
    """User fields {name: XPath} of one part of a rule, compiled once, evaluated together on a node."""

    __slots__ = ("fields",)

    def __init__(self, prefix: str, xpaths: Mapping[str, str]):
        self.fields = tuple((name, FieldXPath(f"{prefix}.{name}", source)) for name, source in xpaths.items())

    def extract(self, node: etree._Element, errors: list[str]) -> dict[str, str]:
        values = {}
        for name, xpath in self.fields:
            value = xpath.first_value(node, errors)
            if value is not None:
                values[name] = value
        return values

    def __bool__(self) -> bool:
        return bool(self.fields)


def page_root(response: Response, errors: list[str]) -> etree._Element | None:
    """The lxml tree of a text response (parsed once by its selector), or None with an error for anything else."""
    if not isinstance(response, TextResponse):
        content_type = (response.headers.get(b"Content-Type") or b"").decode("latin-1") or "no content type"
        errors.append(f"not a text response ({content_type}): no XPath applies")
        return None
    try:
        root = response.selector.root
    except Exception as exc:  # a body lxml cannot parse is the page's fault, not ours
        errors.append(f"unparsable page: {type(exc).__name__}: {exc}")
        return None
    if not isinstance(root, etree._Element):
        errors.append(f"page has no element tree ({type(root).__name__})")
        return None
    return root


class LinkMaker:
    """Absolute, fragment-free http(s) URLs from a page's link values, each URL once per page.

    URLs are resolved against the page's base URL (``<base href>`` when it has one) and made safe as Scrapy's link
    extractor does (``safe_url_string`` in the page's encoding), so both spiders and Scrapy's requests spell a URL the
    same way; they are not canonicalised (no query reordering): the site gets the URL its page gave.
    """

    __slots__ = ("base_url", "encoding", "seen")

    def __init__(self, response: Response, seen: Iterable[str] = ()):
        self.base_url = get_base_url(response) if isinstance(response, TextResponse) else response.url
        self.encoding = response.encoding if isinstance(response, TextResponse) else "utf-8"
        self.seen = set(seen)

    def absolute(self, value: str) -> str | None:
        """The URL ``value`` stands for on this page, or None when it is no http(s) URL."""
        try:
            url = urldefrag(safe_url_string(urljoin(self.base_url, value.strip()), encoding=self.encoding)).url
        except ValueError:  # e.g. an unterminated IPv6 host: a bogus link, skipped as LinkExtractor does
            return None
        return url if url.lower().startswith(FOLLOWED_SCHEMES) else None

    def new(self, value: str) -> str | None:
        """The absolute URL of ``value`` if it is one and was not made on this page before."""
        url = self.absolute(value)
        if url is None or url in self.seen:
            return None
        self.seen.add(url)
        return url

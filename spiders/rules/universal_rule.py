"""The universal spider's rule (seed tables 4-10, 4-11): CrawlSpider-style link rules, from a page or a sitemap.

A rule::

    {"rules": [{"allow": "/page/", "follow": true},                          # list pages: followed
               {"allow": r"/\\d{4}/\\d{2}/", "deny": "/video/",           # articles: extracted
                "restrict_xpaths": "//main", "extract": {"title": "//h1"}}],
     "start": "url",                                                         # or "sitemap"
     "required": ["title"]}

Each link rule is a Scrapy ``LinkExtractor(allow, deny, restrict_xpaths)`` plus a domain filter (``allow_domains``,
``deny_domains``; a domain also takes its subdomains). A rule without ``allow_domains`` keeps to the start URL's
domain (:func:`messaging.domains.domain_of`). The domains are matched here against the URL's *host*, not by the link
extractor, whose ``url_is_from_any_domain`` compares the network location with its port and so would never take
``http://news.fleet.test:8123/`` for ``news.fleet.test``.

As in CrawlSpider, a page's links go to the first rule that takes them, each URL once per page, and a page reached
through rule *i* (callback ``"rule:<i>"``) is extracted with rule *i*'s ``extract`` (even an empty one: "store this
page", main-text extraction does the rest) and its links are followed only if rule *i* follows: ``follow``, or by
default when it extracts nothing. The start page (callback ``""``) is always followed, and extracted only when a rule
takes its URL. The whole page is scanned for links once for all rules without ``restrict_xpaths``, and once per
distinct ``restrict_xpaths``; each rule then only tests URLs, so 64 rules do not mean 64 scans of a 10,000-link page.

A sitemap (``start: "sitemap"``, :meth:`UniversalRule.parse_sitemap`) gives sub-sitemaps (callback ``"sitemap"``,
kept to the rules' domains) or pages, each going to the first rule that takes its URL; a robots.txt gives its
``Sitemap:`` lines. Gzipped sitemaps (``.xml.gz`` served without ``Content-Encoding``) are gunzipped with a cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.gz import gunzip, gzip_magic_number
from scrapy.utils.misc import arg_to_iter
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from messaging.domains import InvalidDomain, domain_of
from messaging.regexes import UnsafeRegex, compile_user_regex
from spiders.rules.fields import FOLLOWED_SCHEMES, FieldSet, Link, LinkMaker, PageResult, RuleError, page_root

START = ""
SITEMAP = "sitemap"
RULE_PREFIX = "rule:"
# The sitemap protocol caps a sitemap at 50 MB uncompressed; a bigger body is cut off (a gzip bomb, or not a sitemap).
SITEMAP_MAX_BYTES = 50 * 1024 * 1024


def rule_callback(index: int) -> str:
    return f"{RULE_PREFIX}{index}"


def _domains(value: Any) -> tuple[str, ...]:
    return tuple(domain.strip().rstrip(".").lower() for domain in arg_to_iter(value) if domain.strip())


def _host_in(host: str, domains: Iterable[str]) -> bool:
    return any(host == domain or host.endswith("." + domain) for domain in domains)


def _host(url: str) -> str | None:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.rstrip(".") if host else None


class LinkRule:
    """One entry of ``rules``: which URLs it takes, where on a page it looks, whether it extracts and follows."""

    def __init__(self, index: int, spec: dict[str, Any], default_domain: str):
        self.index = index
        self.callback = rule_callback(index)
        try:
            # The request's regexes run in RE2 (linear time: a catastrophic pattern cannot stall the worker), not in
            # LinkExtractor's Python re; the link scan is LinkExtractor's; domains are matched by host below.
            self.allow = tuple(compile_user_regex(p) for p in arg_to_iter(spec.get("allow")))
            self.deny = tuple(compile_user_regex(p) for p in arg_to_iter(spec.get("deny")))
        except UnsafeRegex as exc:  # the intake refuses such a rule: an old request, or one that bypassed it
            raise RuleError(f"rules[{index}]: bad allow/deny: {exc}") from exc
        self.allow_domains = _domains(spec.get("allow_domains")) or (default_domain,)
        self.deny_domains = _domains(spec.get("deny_domains"))
        self.restrict_xpaths = tuple(arg_to_iter(spec.get("restrict_xpaths")))
        self.extracts = "extract" in spec
        self.fields = FieldSet(f"rules[{index}].extract", spec.get("extract") or {})
        self.follows = bool(spec.get("follow", not self.extracts))

    def takes_host(self, host: str) -> bool:
        return _host_in(host, self.allow_domains) and not _host_in(host, self.deny_domains)

    def takes(self, url: str, host: str | None = None) -> bool:
        host = host if host is not None else _host(url)
        return (host is not None and self.takes_host(host)
                and (not self.allow or any(regex.search(url) for regex in self.allow))
                and not any(regex.search(url) for regex in self.deny))


class UniversalRule:
    """A universal crawl's rule, compiled once per crawl; ``parse_page``/``parse_sitemap`` per response."""

    def __init__(self, rules: list[LinkRule], start: str = "url", required: tuple[str, ...] = (),
                 ignore_robots_meta: bool = False):
        if not rules:
            raise RuleError("a universal rule needs at least one link rule")
        self.rules = rules
        self.start = start
        self.required = required
        self.ignore_robots_meta = ignore_robots_meta  # rel="nofollow" links, meta robots, X-Robots-Tag
        # One plain extractor per distinct restrict_xpaths (() = the whole page): the link scans a page needs.
        self._scanners = {rule.restrict_xpaths: LinkExtractor(restrict_xpaths=rule.restrict_xpaths)
                          for rule in rules}

    @classmethod
    def from_json(cls, rule: dict[str, Any], start_url: str) -> UniversalRule:
        """The rule of a crawl request (valid against ``rule-universal.json``) and the crawl's start URL."""
        try:
            default_domain = domain_of(start_url)
        except InvalidDomain as exc:
            raise RuleError(f"start URL {start_url!r} has no domain: {exc}") from exc
        specs = rule.get("rules") or []
        return cls([LinkRule(index, spec, default_domain) for index, spec in enumerate(specs)],
                   start=rule.get("start") or "url", required=tuple(rule.get("required") or ()),
                   ignore_robots_meta=rule.get("ignore_robots_meta") is True)

    # --- pages -----------------------------------------------------------------------------------------------
    def parse_page(self, response: Response, callback: str) -> PageResult:
        """A page reached through ``callback`` ("" for the start page, "rule:<i>" for rule i's links)."""
        result = PageResult()
        if callback == START:
            rule = self.rule_for(response.url)
            follow = True
        else:
            rule = self._rule_of(callback, result.errors)
            if rule is None:
                return result
            follow = rule.follows
        root = page_root(response, result.errors)
        if root is None:
            return result
        if rule is not None and rule.extracts:
            result.items.append(rule.fields.extract(root, result.errors))
        if follow and isinstance(response, TextResponse):  # it is one: page_root found its tree
            nofollow: set[str] = set()
            result.links = self._links(response, result.errors, nofollow)
            result.nofollow = len(nofollow)
        return result

    def _rule_of(self, callback: str, errors: list[str]) -> LinkRule | None:
        index = callback.removeprefix(RULE_PREFIX)
        if callback.startswith(RULE_PREFIX) and index.isdigit() and int(index) < len(self.rules):
            return self.rules[int(index)]
        errors.append(f"unknown callback {callback!r} (this rule has {len(self.rules)} link rules)")
        return None

    def _links(self, response: TextResponse, errors: list[str], nofollow: set[str]) -> list[Link]:
        scans: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        seen: set[str] = set()
        found: list[Link] = []
        for rule in self.rules:
            if rule.restrict_xpaths not in scans:
                scans[rule.restrict_xpaths] = self._scan(response, rule, errors, nofollow)
            for url, host in scans[rule.restrict_xpaths]:
                if url not in seen and rule.takes(url, host):
                    seen.add(url)
                    found.append(Link(url, rule.callback, {}))
        return found

    def _scan(self, response: TextResponse, rule: LinkRule, errors: list[str],
              nofollow: set[str]) -> list[tuple[str, str]]:
        """(URL, host) of every http(s) link of the page (or of the rule's regions), without fragment, once each;
        the URLs of links marked ``rel="nofollow"`` go to ``nofollow`` instead, unless the rule ignores them."""
        try:
            scrapy_links = self._scanners[rule.restrict_xpaths].extract_links(response)
        # restrict_xpaths are the user's: an XPath failing here (or selecting text, which has no links) is the
        # rule's fault and only costs this rule its links.
        except Exception as exc:
            errors.append(f"rules[{rule.index}].restrict_xpaths {list(rule.restrict_xpaths)!r} failed: "
                          f"{type(exc).__name__}: {exc}")
            return []
        # LinkExtractor's URLs are absolute and safe already: only the fragment goes. Hosts are parsed once here,
        # not once per rule.
        scanned, seen = [], set()
        for link in scrapy_links:
            url = link.url.split("#", 1)[0]
            if url in seen or not url.lower().startswith(FOLLOWED_SCHEMES):
                continue
            if link.nofollow and not self.ignore_robots_meta:
                nofollow.add(url)
                continue
            seen.add(url)
            host = _host(url)
            if host is not None:
                scanned.append((url, host))
        return scanned

    # --- sitemaps --------------------------------------------------------------------------------------------
    def parse_sitemap(self, response: Response) -> PageResult:
        """A sitemap index (sub-sitemaps), a urlset (pages, to the first rule taking each) or a robots.txt."""
        result = PageResult()
        links = LinkMaker(response)
        if urlsplit(response.url).path.endswith("/robots.txt"):
            for url in sitemap_urls_from_robots(response.body, base_url=response.url):
                self._add_sitemap(links, url, result)
            return result
        body = self._sitemap_body(response, result.errors)
        if not body:
            return result
        try:
            sitemap = Sitemap(body)
            entries = [entry["loc"] for entry in sitemap]
        except Exception as exc:  # not XML at all (lxml recovers from most damage, not from that)
            result.errors.append(f"not a sitemap: {type(exc).__name__}: {exc}")
            return result
        if sitemap.type == "sitemapindex":
            for loc in entries:
                self._add_sitemap(links, loc, result)
        elif sitemap.type == "urlset":
            for loc in entries:
                page = links.new(loc)
                if page is not None and (rule := self.rule_for(page)) is not None:
                    result.links.append(Link(page, rule.callback, {}))
        else:
            result.errors.append(f"not a sitemap: root element <{sitemap.type}>")
        return result

    def _add_sitemap(self, links: LinkMaker, value: str, result: PageResult) -> None:
        url = links.new(value)
        if url is not None and self.in_scope(url):
            result.links.append(Link(url, SITEMAP, {}))

    @staticmethod
    def _sitemap_body(response: Response, errors: list[str]) -> bytes | None:
        if not gzip_magic_number(response):
            if not response.body.strip():
                errors.append("not a sitemap: empty body")
            return response.body
        try:
            return gunzip(response.body, max_size=SITEMAP_MAX_BYTES)
        except Exception as exc:  # over the cap, or broken gzip
            errors.append(f"gzipped sitemap not readable: {type(exc).__name__}: {exc}")
            return None

    # --- scope -----------------------------------------------------------------------------------------------
    def rule_for(self, url: str) -> LinkRule | None:
        """The first rule that takes ``url`` (domains, allow and deny), or None."""
        host = _host(url)
        if host is None:
            return None
        return next((rule for rule in self.rules if rule.takes(url, host)), None)

    def in_scope(self, url: str) -> bool:
        """Whether any rule's domains take ``url`` (allow/deny patterns aside): where a redirect may lead."""
        host = _host(url)
        return host is not None and any(rule.takes_host(host) for rule in self.rules)

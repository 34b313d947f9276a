"""The demo web's sites: names, addresses, URL schemes and deterministic articles.

Every site is a host name under the reserved ``.test`` top-level domain (RFC 2606: it never resolves on
the real internet) with its own loopback address, so per-host logic (robots.txt, politeness,
``response.ip_address``) sees distinct hosts. Article *i* of a site is a pure function of the seed, the site
and *i*: the same seed and page count give the same pages, and the expected counts are known without crawling
(:func:`manifest`).

Article ids grow with publication time; list pages show the newest first, ``per_page`` to a page.
"""

from __future__ import annotations

import ipaddress
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from deploy.demoweb.text import CHINESE, ENGLISH, Language, slugify

if TYPE_CHECKING:
    from deploy.demoweb.router import Host

DOMAIN = "fleet.test"
DEFAULT_FIRST_IP = "127.0.0.11"  # CRAWLFLEET_DEMOWEB_ADDRESSES' default
ADDRESSES = 16  # taken from the first one: 4 content sites, the hostile one, 9 robots hosts, apps, changing
DEFAULT_PAGES = 300
DEFAULT_SEED = "crawlfleet"
DEFAULT_SLOW_SECONDS = 3.0
SITEMAP_CHUNK = 1000  # URLs per sitemap file (the protocol allows 50,000; an index of small ones is usual)
DISALLOWED_PREFIX = "/private/"
DELETED_STORIES = 7  # ids just past the last article: deleted stories that related links still point to (404)
EPOCH = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Theme:
    """CSS hooks of a site's templates: real sites differ, and extraction rules must cope with that."""

    title: str
    body: str
    news_list: str
    byline: str


@dataclass(frozen=True)
class Headline:
    id: int
    section: str
    published: datetime
    title: str
    summary: str
    path: str


@dataclass(frozen=True)
class Article:
    headline: Headline
    author: str
    paragraphs: tuple[str, ...]
    tags: tuple[str, ...]
    comments: tuple[tuple[str, str], ...]  # (user, text)


@dataclass(frozen=True, eq=False)
class Site:
    """One site of the demo web.

    ``style`` spells the URLs: ``blog`` (``/world/page/2/``, slugs) or ``cms`` (``/guonei/index_2.shtml``).
    """

    name: str
    ip: str
    title: str
    language: Language
    encoding: str
    sections: tuple[tuple[str, str], ...]  # (slug, label)
    style: str
    per_page: int
    articles: int
    seed: str
    theme: Theme
    crawl_delay: float | None = None
    calendar_home: bool = False  # the trap site: its home page leads into the endless calendar
    _section_index: dict[str, int] = field(init=False, repr=False)
    # Headlines are memoized: every page shows a dozen of them (lists, related, most read). Only the ids that
    # pages link to are kept, so that requests for made-up ids cannot grow the memo.
    _headlines: dict[int, Headline] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_section_index", {slug: n for n, (slug, _) in enumerate(self.sections)})

    # --- articles ------------------------------------------------------------------------------------------
    def rng(self, *parts: object) -> random.Random:
        return random.Random(":".join([self.seed, self.name, *map(str, parts)]))

    def section_of(self, article_id: int) -> str:
        return self.sections[article_id % len(self.sections)][0]

    def section_label(self, slug: str) -> str:
        return self.sections[self._section_index[slug]][1]

    @staticmethod
    def published(article_id: int) -> datetime:
        # Strictly increasing (97 > 49), irregular enough to look like a newsroom's timeline.
        return EPOCH + timedelta(minutes=97 * article_id + (article_id * 37) % 50)

    def headline(self, article_id: int) -> Headline:
        headline = self._headlines.get(article_id)
        if headline is None:
            headline = self._make_headline(article_id)
            if 0 <= article_id < self.articles + DELETED_STORIES:
                self._headlines[article_id] = headline
        return headline

    def _make_headline(self, article_id: int) -> Headline:
        rng = self.rng("headline", article_id)
        title = self.language.headline(rng)
        summary = self.language.sentence(rng)
        section = self.section_of(article_id)
        return Headline(article_id, section, self.published(article_id), title, summary,
                        self._article_path(article_id, section, title))

    def article(self, article_id: int) -> Article:
        rng = self.rng("article", article_id)
        paragraphs = [self.language.paragraph(rng) for _ in range(rng.randint(4, 8))]
        tags = tuple(sorted(rng.sample(self.language.tags, 3)))
        comments = tuple((self.language.person(rng), self.language.comment(rng))
                         for _ in range(rng.choice((0, 0, 1, 2, 3, 5))))
        author = self.language.person(rng)
        return Article(self.headline(article_id), author, tuple(paragraphs), tags, comments)

    @cached_property
    def most_read(self) -> tuple[int, ...]:
        return tuple(self.rng("most-read").sample(range(self.articles), min(5, self.articles)))

    # --- URLs ----------------------------------------------------------------------------------------------
    def _article_path(self, article_id: int, section: str, title: str) -> str:
        day = self.published(article_id)
        if self.style == "cms":
            return f"/{section}/{day:%Y-%m}/{day:%d}/content_{article_id}.htm"
        return f"/{section}/{day:%Y/%m/%d}/{slugify(title)}-{article_id}.html"

    def article_path(self, article_id: int) -> str:
        return self.headline(article_id).path

    def list_path(self, section: str, page: int = 1) -> str:
        if self.style == "cms":
            return f"/{section}/index.shtml" if page == 1 else f"/{section}/index_{page}.shtml"
        return f"/{section}/" if page == 1 else f"/{section}/page/{page}/"

    @property
    def list_pattern(self) -> str:
        """A regular expression matching the path of every list page (and nothing else)."""
        sections = "|".join(slug for slug, _ in self.sections)
        if self.style == "cms":
            return rf"^/({sections})/index(_[1-9][0-9]*)?\.shtml$"
        return rf"^/({sections})/(page/[1-9][0-9]*/)?$"

    @property
    def article_pattern(self) -> str:
        """A regular expression matching the path of every article (and of deleted ones, which answer 404)."""
        sections = "|".join(slug for slug, _ in self.sections)
        if self.style == "cms":
            return rf"^/({sections})/[0-9]{{4}}-[0-9]{{2}}/[0-9]{{2}}/content_([0-9]+)\.htm$"
        return rf"^/({sections})/[0-9]{{4}}/[0-9]{{2}}/[0-9]{{2}}/[a-z0-9-]+-([0-9]+)\.html$"

    def parse_article_path(self, path: str) -> int | None:
        """The id of the article at ``path`` (maybe a deleted one), or None when it is no article URL."""
        match = re.match(self.article_pattern, path)
        if not match:
            return None
        article_id = int(match.group(2))
        return article_id if self.article_path(article_id) == path else None

    def parse_list_path(self, path: str) -> tuple[str, int] | None:
        """(section, page) of the list page at ``path``, or None."""
        match = re.match(self.list_pattern, path)
        if not match:
            return None
        section = match.group(1)
        if match.group(2) is None:
            return section, 1
        # Page 1 has one URL only, the section's index: "/world/page/1/" is no list page.
        page = int(re.sub(r"[^0-9]", "", match.group(2)))
        return (section, page) if 2 <= page <= self.list_pages(section) else None

    # --- counts --------------------------------------------------------------------------------------------
    def section_ids(self, section: str) -> range:
        """Ids of a section's articles, newest first."""
        ids = range(self._section_index[section], self.articles, len(self.sections))
        return ids[::-1]

    def list_pages(self, section: str) -> int:
        return max(1, -(-len(self.section_ids(section)) // self.per_page))

    def list_page_ids(self, section: str, page: int) -> range:
        return self.section_ids(section)[(page - 1) * self.per_page:page * self.per_page]

    def latest_ids(self, count: int) -> range:
        return range(self.articles - 1, max(-1, self.articles - 1 - count), -1)

    def list_paths(self) -> Iterator[str]:
        for section, _ in self.sections:
            for page in range(1, self.list_pages(section) + 1):
                yield self.list_path(section, page)

    @property
    def sitemap_chunks(self) -> int:
        return max(1, -(-self.articles // SITEMAP_CHUNK))

    def describe(self, port: int) -> dict[str, Any]:
        """The site's entry in the manifest: what a complete crawl of it finds."""
        from deploy.demoweb.busy import describe_busy  # it builds on this module (and on the templates)

        return {
            "ip": self.ip,
            "url": base_url(self.name, port),
            "title": self.title,
            "language": self.language.code,
            "encoding": self.encoding,
            "sections": [slug for slug, _ in self.sections],
            "articles": self.articles,
            "per_page": self.per_page,
            "list_pages": {slug: self.list_pages(slug) for slug, _ in self.sections},
            "list_pattern": self.list_pattern,
            "article_pattern": self.article_pattern,
            "sitemap": f"{base_url(self.name, port)}sitemap.xml",
            "disallowed": [DISALLOWED_PREFIX, "/_demoweb/"],
            "crawl_delay": self.crawl_delay,
            "calendar": base_url(self.name, port) + calendar_path(self.published(self.articles - 1))[1:],
            "busy": describe_busy(self, port),  # /busy/: 429 with a Retry-After for a moment (demoweb.busy)
        }


def calendar_path(day: datetime | tuple[int, int, int]) -> str:
    year, month, date = (day.year, day.month, day.day) if isinstance(day, datetime) else day
    return f"/calendar/{year}/{month:02d}/{date:02d}/"


def base_url(name: str, port: int) -> str:
    """The root URL of a demo site, e.g. ``http://news.fleet.test:8123/``."""
    return f"http://{name}:{port}/"


def address(first_ip: str, offset: int) -> str:
    """The demo web's ``offset``-th loopback address from ``first_ip`` (CRAWLFLEET_DEMOWEB_ADDRESSES): all of its
    :data:`ADDRESSES` must be loopback addresses."""
    try:
        first = ipaddress.IPv4Address(first_ip.strip())
    except ValueError as exc:
        raise ValueError(f"CRAWLFLEET_DEMOWEB_ADDRESSES: {first_ip!r} is not an IPv4 address") from exc
    if not (first.is_loopback and (first + ADDRESSES - 1).is_loopback):
        raise ValueError(f"CRAWLFLEET_DEMOWEB_ADDRESSES: {first_ip} .. {first + ADDRESSES - 1} must all be loopback "
                         f"addresses (127.0.0.0/8)")
    return str(first + offset)


def build_sites(pages: int = DEFAULT_PAGES, seed: str = DEFAULT_SEED,
                first_ip: str = DEFAULT_FIRST_IP) -> tuple[Host, ...]:
    """The demo web: ``pages`` articles on each content site (the trap site: a tenth of that, at least 5), then
    the hostile site (``deploy.demoweb.hostile``), the robots hosts (``deploy.demoweb.robotsweb``) and the
    client-rendered site (``deploy.demoweb.spa``), which are no :class:`Site` and come last; their addresses are
    consecutive from ``first_ip`` (the changing site, a process of its own, takes the 16th)."""
    # They build on this module: imported when the sites are built.
    from deploy.demoweb.hostile import HostileSite
    from deploy.demoweb.robotsweb import robots_hosts
    from deploy.demoweb.spa import ClientSite

    if pages < 1:
        raise ValueError(f"pages must be positive, not {pages}")
    ip = [address(first_ip, n) for n in range(ADDRESSES)]
    return (
        Site(f"news.{DOMAIN}", ip[0], "Fleet Daily News", ENGLISH, "utf-8",
             (("world", "World"), ("politics", "Politics"), ("business", "Business"), ("tech", "Technology")),
             "blog", 10, pages, theme=Theme("article-title", "article-body", "news-list", "byline"),
             seed=seed),
        Site(f"china.{DOMAIN}", ip[1], "舰队新闻网", CHINESE, "gbk",
             (("guonei", "国内"), ("guoji", "国际"), ("caijing", "财经"), ("keji", "科技"),
              ("shehui", "社会")),
             "cms", 15, pages, theme=Theme("main-title", "TRS_Editor", "list_con", "info"), seed=seed),
        Site(f"blog.{DOMAIN}", ip[2], "Fleet Notes", ENGLISH, "utf-8",
             (("essays", "Essays"), ("notes", "Notes"), ("travel", "Travel")),
             "blog", 8, pages, theme=Theme("entry-title", "entry-content", "post-list", "entry-meta"),
             crawl_delay=2.0, seed=seed),
        Site(f"trap.{DOMAIN}", ip[3], "Fleet Events", ENGLISH, "utf-8",
             (("events", "Events"), ("venues", "Venues")),
             "blog", 10, max(5, pages // 10), theme=Theme("event-title", "event-body", "event-list", "meta"),
             calendar_home=True, seed=seed),
        HostileSite(ip=ip[4]),
        *robots_hosts(ip[5]),
        ClientSite(seed, ip=ip[14]),
    )


def hosts_file_text(sites: Iterable[Host], port: int) -> str:
    """The demo web's names in ``/etc/hosts`` format (read by :mod:`messaging.hostmap`)."""
    lines = [f"# crawlfleet demo web (python -m deploy.demoweb), port {port}"]
    lines += [f"{site.ip}\t{site.name}" for site in sites]
    return "\n".join(lines) + "\n"


def manifest(sites: Iterable[Host], *, port: int, pages: int, seed: str, static: bool,
             slow_seconds: float) -> dict[str, Any]:
    """What the demo web serves, for tests and the demo to check a crawl's completeness (content sites under
    ``sites``, the hostile site and what a crawl should make of each of its pages under ``hostile``, the robots
    hosts under ``robots``, the client-rendered site under ``spa``)."""
    sites = tuple(sites)
    return {
        "port": port,
        "pages": pages,
        "seed": seed,
        "static": static,
        "slow_seconds": slow_seconds,
        "sites": {site.name: site.describe(port) for site in sites if isinstance(site, Site)},
        "hostile": {site.name: site.describe(port) for site in sites if _section(site) == "hostile"},
        "robots": {site.name: site.describe(port) for site in sites if _section(site) == "robots"},
        "spa": {site.name: site.describe(port) for site in sites if _section(site) == "spa"},
    }


def _section(site: Any) -> str:
    """The manifest section of a site that is no :class:`Site`: the hostile site's, a robots host's, or the
    client-rendered one's."""
    from deploy.demoweb.robotsweb import RobotsHost

    if isinstance(site, Site):
        return "sites"
    if isinstance(site, RobotsHost):
        return "robots"
    return getattr(site, "manifest_section", "hostile")

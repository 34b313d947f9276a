"""HTML (and robots.txt, sitemaps) of the demo sites, as text; :mod:`deploy.demoweb.router` encodes it.

Pages carry the boilerplate that main-text extraction must see through: navigation, a banner and a sidebar ad,
"most read" and related links, comments and a footer. Links are root-relative, as on most real sites; only the
canonical link and the sitemaps are absolute (``origin`` is ``http://name:port``).
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from html import escape

from deploy.demoweb.sites import DELETED_STORIES, DISALLOWED_PREFIX, SITEMAP_CHUNK, Site, calendar_path

Day = tuple[int, int, int]

LABELS = {
    "en": {
        "home": "Home", "latest": "Latest", "live": "Live", "search": "Search", "next": "Next \u00bb",
        "prev": "\u00ab Previous", "related": "Related stories", "comments": "Comments",
        "most_read": "Most read", "archive": "Archive calendar", "ad": "Advertisement", "about": "About us",
        "contact": "Contact", "privacy": "Privacy policy", "staff": "Staff login",
        "rights": "All rights reserved.", "by": "By", "tags": "Tags", "page": "Page", "events": "Events on",
        "next_day": "Next day \u00bb", "prev_day": "\u00ab Previous day", "next_month": "Same day next month",
        "not_found": "Page not found", "error": "Something went wrong",
        "live_title": "Live: results as they come in",
    },
    "zh": {
        "home": "首页", "latest": "最新", "live": "直播", "search": "搜索", "next": "下一页",
        "prev": "上一页", "related": "相关新闻", "comments": "网友评论", "most_read": "热门排行",
        "archive": "往期回顾", "ad": "广告", "about": "关于我们", "contact": "联系我们",
        "privacy": "隐私政策", "staff": "内部登录", "rights": "版权所有", "by": "作者：", "tags": "标签",
        "page": "第", "events": "活动日程：", "next_day": "后一天", "prev_day": "前一天",
        "next_month": "下月同日", "not_found": "您访问的页面不存在", "error": "服务器繁忙，请稍后再试",
        "live_title": "直播：实时更新",
    },
}

STYLESHEET = (
    "body{font-family:sans-serif;margin:0}header,footer{background:#123;color:#fff;padding:8px}"
    "nav a{color:#fff;margin-right:12px}main{float:left;width:68%;padding:12px}"
    "aside.sidebar{float:right;width:26%;padding:12px}.ad{background:#eee;text-align:center}"
    "footer{clear:both}\n"
)
# A 1x1 transparent GIF: the ad image.
AD_GIF = bytes.fromhex(
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)


def _labels(site: Site) -> dict[str, str]:
    return LABELS[site.language.code]


def _meta_charset(site: Site) -> str:
    if site.encoding == "utf-8":
        return '<meta charset="utf-8">'
    return f'<meta http-equiv="Content-Type" content="text/html; charset={site.encoding}">'


def layout(site: Site, origin: str, title: str, main: str, *, canonical: str | None = None,
           head: str = "") -> str:
    """A whole page: header with navigation, banner ad, ``main``, sidebar and footer."""
    label = _labels(site)
    nav = [f'<a href="/">{label["home"]}</a>']
    nav += [f'<a href="{site.list_path(slug)}">{escape(name)}</a>' for slug, name in site.sections]
    nav += [f'<a href="/latest">{label["latest"]}</a>', f'<a href="/live/">{label["live"]}</a>',
            f'<a href="/search?q=">{label["search"]}</a>']
    most_read = "".join(_headline_item(site, article_id, summary=False)
                        for article_id in site.most_read)
    newest = site.published(site.articles - 1)
    canonical_link = f'<link rel="canonical" href="{origin}{canonical}">' if canonical else ""
    return (
        f'<!DOCTYPE html>\n<html lang="{site.language.code}">\n<head>\n{_meta_charset(site)}\n'
        f"<title>{escape(title)}</title>\n"
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<link rel="stylesheet" href="/static/site.css">{canonical_link}{head}\n</head>\n<body>\n'
        f'<header class="site-header"><a class="logo" href="/">{escape(site.title)}</a>\n'
        f'<nav class="main-nav">{" ".join(nav)}</nav></header>\n'
        f'{_ad(site, "banner", 728, 90)}\n'
        f"<main>\n{main}\n</main>\n"
        f'<aside class="sidebar">{_ad(site, "sidebar", 300, 250)}\n'
        f'<h3>{label["most_read"]}</h3><ul class="most-read">{most_read}</ul>\n'
        f'<h3>{label["archive"]}</h3><p><a href="{calendar_path(newest)}">{label["archive"]}</a></p>'
        "</aside>\n"
        f'<footer class="site-footer"><a href="/about/">{label["about"]}</a> '
        f'<a href="/contact/">{label["contact"]}</a> <a href="/privacy/">{label["privacy"]}</a> '
        f'<a href="{DISALLOWED_PREFIX}login">{label["staff"]}</a>\n'
        f'<p class="copyright">{escape(site.title)} {label["rights"]}</p></footer>\n'
        "</body>\n</html>\n"
    )


def _ad(site: Site, slot: str, width: int, height: int) -> str:
    ad_id = sum(map(ord, site.name + slot)) % 97
    label = _labels(site)["ad"]
    return (f'<div class="ad ad-{slot}"><span class="ad-label">{label}</span>'
            f'<a href="/ads/click?id={ad_id}" rel="sponsored nofollow">'
            f'<img src="/static/ad.gif" width="{width}" height="{height}" alt="{label}"></a></div>')


def _headline_item(site: Site, article_id: int, *, summary: bool = True) -> str:
    headline = site.headline(article_id)
    text = f'<p class="summary">{escape(headline.summary)}</p>' if summary else ""
    return (f'<li><a class="title" href="{headline.path}">{escape(headline.title)}</a> '
            f'<span class="date">{headline.published:%Y-%m-%d %H:%M}</span>{text}</li>')


def home_page(site: Site, origin: str) -> str:
    label = _labels(site)
    items = "".join(_headline_item(site, article_id) for article_id in site.latest_ids(site.per_page))
    calendar = ""
    if site.calendar_home:
        start = calendar_path(site.published(site.articles - 1))
        calendar = f'<p class="calendar-entry"><a href="{start}">{label["events"]} {start[10:-1]}</a></p>'
    sections = "".join(f'<li><a href="{site.list_path(slug)}">{escape(name)}</a></li>'
                       for slug, name in site.sections)
    main = (f'<h1 class="site-title">{escape(site.title)}</h1>{calendar}'
            f'<ul class="{site.theme.news_list}">{items}</ul><ul class="sections">{sections}</ul>')
    return layout(site, origin, site.title, main, canonical="/")


def list_page(site: Site, origin: str, section: str, page: int) -> str:
    label = _labels(site)
    name = site.section_label(section)
    items = "".join(_headline_item(site, article_id) for article_id in site.list_page_ids(section, page))
    main = (f'<h1 class="section-title">{escape(name)}</h1>\n'
            f'<ul class="{site.theme.news_list}">{items}</ul>\n{_pagination(site, section, page, label)}')
    title = f"{name} - {site.title}" if page == 1 else f"{name} - {label['page']} {page} - {site.title}"
    return layout(site, origin, title, main, canonical=site.list_path(section, page))


def _pagination(site: Site, section: str, page: int, label: dict[str, str]) -> str:
    last = site.list_pages(section)
    shown = sorted({1, last, *range(max(1, page - 3), min(last, page + 3) + 1)})
    links: list[str] = []
    if page > 1:
        links.append(f'<a class="prev" href="{site.list_path(section, page - 1)}">{label["prev"]}</a>')
    for number, previous in zip(shown, [0, *shown], strict=False):
        if number - previous > 1:
            links.append('<span class="gap">\u2026</span>')
        links.append(f'<span class="current">{number}</span>' if number == page
                     else f'<a href="{site.list_path(section, number)}">{number}</a>')
    if page < last:
        links.append(f'<a class="next" href="{site.list_path(section, page + 1)}">{label["next"]}</a>')
    return f'<div class="pagination">{" ".join(links)}</div>'


def article_page(site: Site, origin: str, article_id: int) -> str:
    label = _labels(site)
    article = site.article(article_id)
    headline = article.headline
    body = "\n".join(f"<p>{escape(text)}</p>" for text in article.paragraphs)
    tags = " ".join(f'<span class="tag">{escape(tag)}</span>' for tag in article.tags)
    comments = "".join(f'<div class="comment"><span class="user">{escape(user)}</span>'
                       f"<p>{escape(text)}</p></div>" for user, text in article.comments)
    published = headline.published.isoformat()
    main = (
        f'<article class="article" itemscope itemtype="https://schema.org/NewsArticle">\n'
        f'<h1 class="{site.theme.title}">{escape(headline.title)}</h1>\n'
        f'<meta itemprop="headline" content="{escape(headline.title)}">\n'
        f'<div class="{site.theme.byline}">'
        f'<span class="author">{label["by"]} <span itemprop="author">{escape(article.author)}</span></span> '
        f'<time datetime="{published}" itemprop="datePublished">{headline.published:%Y-%m-%d %H:%M}</time> '
        f'<a class="section" href="{site.list_path(headline.section)}">'
        f"{escape(site.section_label(headline.section))}</a></div>\n"
        f'<div class="{site.theme.body}">\n{body}\n</div>\n'
        f'<div class="tags">{label["tags"]}: {tags}</div>\n</article>\n'
        f'<aside class="related"><h2>{label["related"]}</h2><ul>{_related(site, article_id)}</ul></aside>\n'
        f'<section class="comments"><h2>{label["comments"]} ({len(article.comments)})</h2>'
        f"{comments}</section>"
    )
    head = (f'\n<meta name="description" content="{escape(headline.summary)}">'
            f'\n<meta property="article:published_time" content="{published}">'
            f"{article_metadata(site, origin, article_id)}")
    return layout(site, origin, f"{headline.title} - {site.title}", main, canonical=headline.path, head=head)


MALFORMED_JSON_LD_EVERY = 7  # every 7th story also carries a JSON-LD block that is not JSON (as real CMSs do)


def article_metadata(site: Site, origin: str, article_id: int) -> str:
    """OpenGraph, Twitter card and JSON-LD of a story, as news sites write them (the crawl stores them as
    ``metadata``); stories whose id is a multiple of ``MALFORMED_JSON_LD_EVERY`` add a broken breadcrumb block."""
    article = site.article(article_id)
    headline = article.headline
    url = f"{origin}{headline.path}"
    image = f"{origin}/static/ad.gif"
    section = site.section_label(headline.section)
    modified = (headline.published + timedelta(hours=1 + article_id % 5)).isoformat()
    data = {"@context": "https://schema.org", "@type": "NewsArticle", "headline": headline.title,
            "datePublished": headline.published.isoformat(), "dateModified": modified,
            "author": [{"@type": "Person", "name": article.author}], "articleSection": section,
            "inLanguage": site.language.code, "image": image, "mainEntityOfPage": url,
            "publisher": {"@type": "Organization", "name": site.title}}
    block = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    tags = [("og:type", "article"), ("og:title", headline.title), ("og:url", url), ("og:image", image),
            ("og:site_name", site.title), ("article:section", section), ("article:modified_time", modified)]
    meta = "".join(f'\n<meta property="{name}" content="{escape(value)}">' for name, value in tags)
    meta += ('\n<meta name="twitter:card" content="summary">'
             f'\n<meta name="twitter:title" content="{escape(headline.title)}">')
    broken = ""
    if article_id % MALFORMED_JSON_LD_EVERY == 0:
        broken = ('\n<script type="application/ld+json">{"@type": "BreadcrumbList", "itemListElement": '
                  '[{"@type": "ListItem", "position": 1,</script>')
    return f'{meta}\n<script type="application/ld+json">{block}</script>{broken}'



def _related(site: Site, article_id: int) -> str:
    """Neighbours in its section, one via a legacy URL (301) and one deleted story (404), as on real sites."""
    step = len(site.sections)
    neighbours = (article_id - step, article_id + step, article_id - 2 * step)
    links = [(site.article_path(other), other) for other in neighbours if 0 <= other < site.articles]
    if article_id - 3 * step >= 0:
        links.append((f"/old/{article_id - 3 * step}.html", article_id - 3 * step))
    deleted = site.articles + article_id % DELETED_STORIES
    links.append((site.article_path(deleted), deleted))
    return "".join(f'<li><a href="{href}">{escape(site.headline(other).title)}</a></li>'
                   for href, other in links)


def shift_day(day: Day, days: int) -> Day:
    """``day`` moved by ``days``, for any year: the Gregorian calendar repeats every 400 years."""
    year, month, mday = day
    base = 2000 + year % 400
    moved = date(base, month, mday) + timedelta(days=days)
    return year - base + moved.year, moved.month, moved.day


def valid_day(day: Day) -> bool:
    year, month, mday = day
    try:
        date(2000 + year % 400, month, mday)
    except ValueError:
        return False
    return year >= 1


def calendar_page(site: Site, origin: str, day: Day) -> str:
    """The crawler trap: every day links to the next one, forever."""
    label = _labels(site)
    rng = site.rng("calendar", *day)
    events = "".join(f"<li>{escape(site.language.headline(rng))}</li>" for _ in range(rng.randint(1, 4)))
    links = []
    previous = shift_day(day, -1)
    if previous[0] >= 1:
        links.append(f'<a class="prev" href="{calendar_path(previous)}">{label["prev_day"]}</a>')
    links.append(f'<a class="next" href="{calendar_path(shift_day(day, 1))}">{label["next_day"]}</a>')
    year, month, mday = day
    next_month = (year + month // 12, month % 12 + 1, mday)
    if valid_day(next_month):
        links.append(f'<a href="{calendar_path(next_month)}">{label["next_month"]}</a>')
    stamp = f"{year}-{month:02d}-{mday:02d}"
    main = (f'<h1 class="calendar-title">{label["events"]} {stamp}</h1><ul class="events">{events}</ul>'
            f'<div class="calendar-nav">{" ".join(links)}</div>')
    title = f"{label['events']} {stamp} - {site.title}"
    return layout(site, origin, title, main, canonical=calendar_path(day))


def message_page(site: Site, origin: str, title: str, text: str) -> str:
    """A page with one message: errors, the info pages, the slow page, the disallowed area."""
    main = f'<h1 class="page-title">{escape(title)}</h1><p class="message">{escape(text)}</p>'
    return layout(site, origin, f"{title} - {site.title}", main)


def error_page(site: Site, origin: str, status: int) -> str:
    label = _labels(site)
    return message_page(site, origin, f"{status}", label["not_found"] if status == 404 else label["error"])


def robots_txt(site: Site, origin: str) -> str:
    delay = f"Crawl-delay: {site.crawl_delay:g}\n" if site.crawl_delay else ""
    return (
        f"# robots.txt for {site.name}\n"
        "User-agent: BadBot\nDisallow: /\n\n"
        f"User-agent: *\nDisallow: {DISALLOWED_PREFIX}\nDisallow: /_demoweb/\nDisallow: /ads/\n{delay}\n"
        f"Sitemap: {origin}/sitemap.xml\n"
    )


def sitemap_index(site: Site, origin: str) -> str:
    entries = "".join(f"<sitemap><loc>{origin}/sitemaps/articles-{chunk}.xml</loc></sitemap>\n"
                      for chunk in range(1, site.sitemap_chunks + 1))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{entries}</sitemapindex>\n')


def sitemap_chunk(site: Site, origin: str, chunk: int) -> str:
    """Articles ``(chunk - 1) * SITEMAP_CHUNK`` onwards, oldest first, with their publication time."""
    ids = range((chunk - 1) * SITEMAP_CHUNK, min(site.articles, chunk * SITEMAP_CHUNK))
    entries = "".join(f"<url><loc>{origin}{site.article_path(article_id)}</loc>"
                      f"<lastmod>{site.published(article_id).isoformat()}</lastmod></url>\n"
                      for article_id in ids)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{entries}</urlset>\n')

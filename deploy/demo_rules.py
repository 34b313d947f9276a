"""The rules of the demo's crawls (``crawlfleet demo``), written for the demo web's templates.

- ``list`` on the news site, from a section's first list page: each entry of the list gives its ``title`` and
  ``date``; its link leads to the article, whose ``body`` and ``author`` are taken there; ``next_page`` follows the
  pagination.
- ``universal`` on the Chinese site (served in GBK, decoded by the workers), from its home page: section and
  pagination links are followed, articles are extracted with their ``title``, ``author`` and ``published`` (and main
  text by the pipelines).
- ``universal`` with ``render: auto`` on the client-rendered site (``apps.fleet.test``): its shells are rendered in
  the workers' browser, its static pages are not.

Both work on every demo site (the themes differ in class names, not in structure); the unit tests check them
against the rendered templates and the end-to-end tests crawl with them.

Politeness: the cluster's default rate (10 requests a minute per site) would keep the demo waiting, so the demo first
raises the two sites' rates through Kafka (``DEMO_SITE_RATES``: site-config requests, as ``crawlfleet site rate``
sends them): 240 a minute per site, per spider type and per host, so the progress shows the throttle at work.
"""

from __future__ import annotations

from typing import Any

NEWS_SITE = "news.fleet.test"
NEWS_START_PATH = "/world/"
CHINA_SITE = "china.fleet.test"
CHINA_START_PATH = "/"
APPS_SITE = "apps.fleet.test"
APPS_START_PATH = "/"
# site -> (requests, window in seconds), cluster-wide, per spider type and per host IP
DEMO_SITE_RATES: dict[str, tuple[int, float]] = {NEWS_SITE: (240, 60.0), CHINA_SITE: (240, 60.0),
                                                 APPS_SITE: (240, 60.0)}

# A news section's list pages, page after page: one item per article, its title (and date) from the list, its body
# and author from the article page. Works on every demo site (the themes differ in class names, not in structure).
DEMO_LIST_RULE: dict[str, Any] = {
    "first_page_xpath": {
        "list_from": "//main/ul/li[a[@class='title']]",
        "second_page_url": "a[@class='title']/@href",
        "next_page": "//div[@class='pagination']/a[@class='next']/@href",
        "title": "a[@class='title']",
        "date": "span[@class='date']",
    },
    "second_page_xpath": {
        "body": "//article/div[p]",
        "author": "substring-after(//article//span[@class='author'], ' ')",
    },
    "required": ["title", "body"],
}
# From a site's home page: section and pagination links are followed (rule 0), articles linked from the news lists
# are extracted and not followed (rule 1). The slow /live/ page is denied; related links (some 301, some 404) and the
# sidebar are outside the restricted regions, so every article is reached once through its section's list pages.
DEMO_UNIVERSAL_RULE: dict[str, Any] = {
    "rules": [
        {
            "allow": [r"^https?://[^/]+/[a-z]+/(page/[0-9]+/)?$", r"^https?://[^/]+/[a-z]+/index(_[0-9]+)?\.shtml$"],
            "deny": r"/live/",
            "restrict_xpaths": ["//nav[@class='main-nav']", "//div[@class='pagination']"],
        },
        {
            "allow": [r"/[0-9]{4}/[0-9]{2}/[0-9]{2}/[a-z0-9-]+-[0-9]+\.html$",
                      r"/[0-9]{4}-[0-9]{2}/[0-9]{2}/content_[0-9]+\.htm$"],
            "restrict_xpaths": "//main/ul",
            "extract": {
                "title": "//article/h1",
                "author": "substring-after(//article//span[@class='author'], ' ')",
                "published": "//article//time/@datetime",
            },
        },
    ],
    "start": "url",
    "required": ["title"],
}

# The client-rendered site (deploy/demoweb/spa.py), ``render: auto``: each page is fetched statically first and
# rendered in the worker's browser only when it is a shell (its story without a title): every third story is static.
DEMO_RENDER_RULE: dict[str, Any] = {
    "rules": [{"allow": r"/stories/[0-9]+\.html$", "follow": True,
               "extract": {"title": "//article/h1", "body": "//article"}}],
    "required": ["title"],
    "render": "auto",
}

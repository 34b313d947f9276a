"""The benchmark sites' articles, as a Scrapy user writes a crawl of them: a ``CrawlSpider`` whose rules are those
of ``deploy.demo_rules.DEMO_UNIVERSAL_RULE`` (follow the sections and their pages; an article is an item)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

LISTS = [r"^https?://[^/]+/[a-z]+/(page/[0-9]+/)?$", r"^https?://[^/]+/[a-z]+/index(_[0-9]+)?\.shtml$"]
ARTICLES = [r"/[0-9]{4}/[0-9]{2}/[0-9]{2}/[a-z0-9-]+-[0-9]+\.html$",
            r"/[0-9]{4}-[0-9]{2}/[0-9]{2}/content_[0-9]+\.htm$"]


class Articles(CrawlSpider):
    name = "articles"
    rules = (
        Rule(LinkExtractor(allow=LISTS, deny=r"/live/",
                           restrict_xpaths=["//nav[@class='main-nav']", "//div[@class='pagination']"]), follow=True),
        Rule(LinkExtractor(allow=ARTICLES, restrict_xpaths="//main/ul"), callback="parse_article"),
    )

    def __init__(self, urls: str = "", crawlid: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [url for url in urls.split(",") if url]
        self.crawlid = crawlid

    def parse_article(self, response: Response) -> Iterator[dict[str, Any]]:
        article = response.xpath("//article")
        yield {"url": response.url, "crawlid": self.crawlid,
               "title": article.xpath("normalize-space(h1)").get(),
               "author": article.xpath("substring-after(.//span[@class='author'], ' ')").get(),
               "published": article.xpath(".//time/@datetime").get()}

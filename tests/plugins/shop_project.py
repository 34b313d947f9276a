"""An ordinary Scrapy project for the shop site (:mod:`tests.plugins.shop_site`), as its users write one (issue 35).

Spiders: ``catalog`` (a ``CrawlSpider``: follow the categories and their pages, a product page is an item), and
``account`` (a ``Spider`` with callbacks by name: log in with a ``FormRequest`` POST whose cookie the order pages
need, ``cb_kwargs`` and ``meta`` to the order pages, an errback that sees a dead link's 404 and yields an item). Both
take the site's address as the argument ``base``. The project's own pipeline counts the items it saw in the worker's
Scrapy stats (``shop/pipeline/items``). :func:`plain_crawl` runs a spider under plain ``scrapy crawl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.plugins.scrapy_project import write_project

NAME = "shop"
FLEET_ADDON = 'ADDONS = {"spiders.addon.FleetAddon": 0}\n'

CATALOG = """\
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class Catalog(CrawlSpider):
    name = "catalog"
    rules = (
        Rule(LinkExtractor(allow=r"/category/"), follow=True),
        Rule(LinkExtractor(allow=r"/product/[0-9]+$"), callback="parse_product", follow=True),
    )

    def __init__(self, base="", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.start_urls = [base + "/"]

    def parse_product(self, response):
        yield {"kind": "product", "name": response.css("h1::text").get(),
               "price": float(response.css(".price::text").get()), "url": response.url}
"""

ACCOUNT = """\
import scrapy


class Account(scrapy.Spider):
    name = "account"

    def __init__(self, base="", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base = base

    async def start(self):
        yield scrapy.Request(self.base + "/login", callback=self.login_page, meta={"step": "form"})

    def login_page(self, response):
        yield scrapy.FormRequest.from_response(response, formdata={"user": "ann", "pw": "secret"},
                                               callback=self.account, cb_kwargs={"who": "ann"})

    def account(self, response, who):
        yield {"kind": "account", "title": response.css("h1::text").get(), "who": who}
        for href in response.css("a.order::attr(href)").getall():
            number = int(href.rsplit("/", 1)[1])
            yield response.follow(href, callback=self.order, cb_kwargs={"number": number, "who": who},
                                  meta={"via": "account"})
        yield response.follow("/gone", callback=self.order, errback=self.gone, cb_kwargs={"number": 0, "who": who})

    def order(self, response, number, who):
        yield {"kind": "order", "number": number, "who": who, "via": response.meta.get("via"),
               "title": response.css("h1::text").get(), "total": response.css(".total::text").get()}

    def gone(self, failure):
        yield {"kind": "gone", "status": failure.value.response.status, "url": failure.request.url}
"""

PIPELINE = """\
class Tally:
    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    def process_item(self, item):
        self.stats.inc_value("shop/pipeline/items")
        return item
"""

SETTINGS = 'ITEM_PIPELINES = {"shop.pipelines.Tally": 300}\nLOG_LEVEL = "INFO"\n'


def write_shop(root: Path, url: str, *, addon: bool = False, spiders: dict[str, str] | None = None) -> Path:
    """The project in ``root`` (``scrapy.cfg``'s deploy target ``url``); ``addon``: its settings list the fleet's
    add-on (a project run without eggs, ``scrapy crawl`` on the fleet)."""
    modules = {"spiders/catalog.py": CATALOG, "spiders/account.py": ACCOUNT, "pipelines.py": PIPELINE,
               **(spiders or {})}
    return write_project(root, NAME, url, modules, settings=SETTINGS + (FLEET_ADDON if addon else ""))


def plain_crawl(root: Path, spider: str, base: str, out: Path, *extra: str) -> list[dict[str, Any]]:
    """``scrapy crawl <spider> -a base=… -O out.jsonl [extra…]`` without the fleet (``ADDONS={}``): its items."""
    argv = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"base={base}", "-O", str(out), "-s", "ADDONS={}",
            *extra]
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": f"{NAME}.settings"}
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def canonical(items: list[dict[str, Any]]) -> list[str]:
    """Items as sorted JSON texts (order-free comparison), without the fleet's own fields."""
    fleet = {"_id", "crawlid", "job", "url_key", "page", "fetched_at", "stored_at"}
    return sorted(json.dumps({k: v for k, v in item.items() if k not in fleet}, sort_keys=True) for item in items)

"""The fleet's components come from one add-on (spiders.addon): the project's spiders get them, the proxy collector
and plain Scrapy runs do not, and a component switched off by a spider stays off."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list

from spiders import addon
from spiders import settings as project_settings
from spiders.spiders.proxy import ProxySpider
from spiders.spiders.universal import UniversalSpider

pytestmark = pytest.mark.unit
FLEET = {path for components in addon.COMPONENTS.values() for path, order in components.items() if order is not None}


def applied(spider: type[Spider], **cmdline) -> Settings:
    """A crawler's settings once the spider's custom_settings and the add-ons are applied (as Crawler does)."""
    settings = Settings()
    settings.setmodule(project_settings, priority="project")
    settings.update(cmdline, priority="cmdline")
    crawler = Crawler(spider, settings)
    crawler.addons.load_settings(crawler.settings)
    return crawler.settings


def components(settings: Settings) -> set[str]:
    return {str(path) for name in addon.COMPONENTS for path in build_component_list(settings.getwithbase(name))}


def test_the_settings_module_enables_the_add_on_and_lists_no_component_itself():
    assert project_settings.ADDONS == {"spiders.addon.FleetAddon": 0}
    for name in (*addon.SETTINGS, *addon.COMPONENTS):
        assert not hasattr(project_settings, name), f"{name} is the add-on's"


def test_a_fleet_spider_runs_every_fleet_component_in_its_order():
    settings = applied(UniversalSpider)
    assert components(settings) >= FLEET
    for name, wanted in addon.COMPONENTS.items():
        for path, order in wanted.items():
            assert settings.getwithbase(name)[path] == order, (name, path)
    assert {name: settings[name] for name in addon.SETTINGS} == addon.SETTINGS
    assert "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware" not in components(settings)


def test_the_proxy_collector_and_plain_scrapy_run_none_of_them():
    proxy = applied(ProxySpider)
    assert not components(proxy) & FLEET
    assert build_component_list(proxy.getwithbase("ITEM_PIPELINES")) == ["spiders.proxies.collect.ProxyStorePipeline"]
    assert proxy["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"
    assert proxy["DUPEFILTER_CLASS"] == "scrapy.dupefilters.RFPDupeFilter"
    plain = applied(UniversalSpider, ADDONS="{}")
    assert not components(plain) & FLEET and plain["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"


def test_what_a_spider_or_the_command_line_sets_wins_over_the_add_on():
    class Quieter(UniversalSpider):
        custom_settings = {"ITEM_PIPELINES": {"spiders.pipelines.mongo.MongoPipeline": None, "my.Pipeline": 500},
                           "DUPEFILTER_CLASS": "my.DupeFilter"}

    settings = applied(Quieter, SCHEDULER="my.Scheduler")
    pipelines = build_component_list(settings.getwithbase("ITEM_PIPELINES"))
    assert "spiders.pipelines.mongo.MongoPipeline" not in pipelines
    assert "my.Pipeline" in pipelines and "spiders.pipelines.clean.CleanPipeline" in pipelines
    assert settings["DUPEFILTER_CLASS"] == "my.DupeFilter" and settings["SCHEDULER"] == "my.Scheduler"


def test_ones_own_spider_gets_the_fleets_core_around_its_project(tmp_path):
    """Issue 35: any spider that is not a rule spider keeps its project's components; the add-on adds the fleet's
    core (scheduler, dupefilter, the output middleware, shared cookie jars, the item store) and none of the rule
    spiders' page work; robots.txt is obeyed as the project's ROBOTSTXT_OBEY says, by the cluster's cache."""

    class Shop(Spider):
        name = "shop"
        custom_settings = {"ITEM_PIPELINES": {"shop.pipelines.Tally": 300}, "ROBOTSTXT_OBEY": True,
                           "USER_AGENT": "ShopBot/1.0 (+https://shop.example)"}

    settings = applied(Shop)
    assert {name: settings[name] for name in addon.SETTINGS} == addon.SETTINGS
    for name, wanted in addon.OWN_COMPONENTS.items():
        for path, order in wanted.items():
            assert settings.getwithbase(name)[path] == order, (name, path)
    assert build_component_list(settings.getwithbase("ITEM_PIPELINES")) == ["shop.pipelines.Tally"]
    spider_mws = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    assert "scrapy.downloadermiddlewares.cookies.CookiesMiddleware" not in spider_mws
    assert "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware" not in spider_mws
    rule_only = {path for path, order in addon.DOWNLOADER_MIDDLEWARES.items() if order is not None} - set(
        addon.OWN_COMPONENTS["DOWNLOADER_MIDDLEWARES"])
    assert rule_only and not set(spider_mws) & rule_only  # no User-Agent rotation, decoding, conditional, render
    assert "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware" in spider_mws  # the project's USER_AGENT
    assert settings.getbool("CRAWLFLEET_ROBOTSTXT_OBEY") and settings["CRAWLFLEET_ROBOTSTXT_USER_AGENT"] == "ShopBot"
    assert not applied(Shop, ROBOTSTXT_OBEY="False").getbool("CRAWLFLEET_ROBOTSTXT_OBEY")

"""``crawlfleet proxies collect|validate|list|serve``: the proxy pool (see :mod:`spiders.proxies`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from deploy.cli_worker import project_settings


@click.group()
def proxies() -> None:
    """The proxy pool: collect proxies from list pages, check them, list them, serve them over HTTP."""


@proxies.command("collect")
@click.option("--url", "urls", multiple=True, help="A proxy-list page (repeatable; default: "
                                                   "CRAWLFLEET_PROXY_LIST_URLS).")
@click.option("--rule", default=None, help="The list pages' XPath rule, JSON or @file (default: "
                                           "CRAWLFLEET_PROXY_LIST_RULE).")
@click.option("-s", "--set", "overrides", multiple=True, metavar="NAME=VALUE", help="A Scrapy setting.")
def collect(urls: tuple[str, ...], rule: str | None, overrides: tuple[str, ...]) -> None:
    """Read the proxy-list pages once (spider ``proxy``) and upsert every proxy into the pool."""
    from scrapy.crawler import CrawlerProcess

    settings = project_settings(overrides)
    arguments: dict[str, Any] = {}
    if urls:
        arguments["urls"] = list(urls)
    if rule is not None:
        arguments["rule"] = rule
    process = CrawlerProcess(settings)
    crawler = process.create_crawler("proxy")
    process.crawl(crawler, **arguments)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    click.echo(f"collected {stats.get('proxy/collected', 0)} proxies ({stats.get('proxy/new', 0)} new, "
               f"{stats.get('proxy/invalid', 0)} invalid entries)")
    if stats.get("log_count/ERROR"):
        sys.exit(1)


@proxies.command("validate")
def validate() -> None:
    """Check every proxy of the pool once through CRAWLFLEET_PROXY_TEST_URL; remove those that keep failing."""
    from twisted.internet import defer, task

    from messaging.service import setup_logging
    from messaging.settings import load
    from spiders.proxies.validator import Validator

    settings = load()
    setup_logging(settings.log_level)

    async def one_pass(reactor: Any) -> None:
        results = await Validator.from_settings(settings, reactor=reactor).check_all()
        alive = sum(1 for result in results if result.ok)
        click.echo(f"checked {len(results)} proxies: {alive} alive, {len(results) - alive} failed")

    task.react(lambda reactor: defer.Deferred.fromCoroutine(one_pass(reactor)))


@proxies.command("list")
@click.option("--all", "every", is_flag=True, help="Every proxy of the pool, not only the live ones.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as GET /proxies shows them.")
def list_command(every: bool, as_json: bool) -> None:
    """The pool's proxies (live ones, fastest first), with their figures; never their credentials."""
    from rich.console import Console
    from rich.table import Table

    from spiders.proxies.store import ProxyStore

    found = [proxy.public() for proxy in ProxyStore.from_settings().proxies(live_only=not every)]
    if as_json:
        for proxy in found:
            click.echo(json.dumps(proxy, sort_keys=True))
        return
    table = Table(title=f"{len(found)} {'proxies' if every else 'live proxies'}")
    columns = ("id", "alive", "speed_seconds", "failures", "last_success", "location", "anonymity", "type")
    for column in columns:
        table.add_column(column)
    for proxy in found:
        table.add_row(*("" if proxy.get(column) is None else str(proxy.get(column)) for column in columns))
    Console().print(table)


@proxies.command("serve")
@click.option("--bind", default=None, help="Address (default: CRAWLFLEET_PROXY_API_BIND).")
@click.option("--port", type=int, default=None, help="Port (default: CRAWLFLEET_PROXY_API_PORT).")
@click.option("--validate/--no-validate", default=True, show_default=True,
              help="Re-check the pool every CRAWLFLEET_PROXY_CHECK_INTERVAL seconds in the background.")
def serve(bind: str | None, port: int | None, validate: bool) -> None:
    """Serve GET /proxy and GET /proxies (JSON), and keep the pool checked, until SIGTERM."""
    import logging

    from twisted.internet.address import IPv4Address, IPv6Address
    from twisted.web import server

    from messaging.reactor import running_reactor, serve_http
    from messaging.service import setup_logging
    from messaging.settings import load
    from spiders.proxies.resource import ProxyPoolResource
    from spiders.proxies.store import ProxyStore
    from spiders.proxies.validator import Validator

    settings = load()
    setup_logging(settings.log_level)
    store = ProxyStore.from_settings(settings)
    bind = bind or settings["CRAWLFLEET_PROXY_API_BIND"]
    port = port if port is not None else settings["CRAWLFLEET_PROXY_API_PORT"]
    reactor = running_reactor()
    bound = serve_http(server.Site(ProxyPoolResource(store)), port, bind).getHost()
    logging.getLogger("crawlfleet.proxies").info("proxy API listening on http://%s:%d", bind,
                                                 bound.port if isinstance(bound, IPv4Address | IPv6Address) else port)
    if validate:
        Validator.from_settings(settings, store=store, reactor=reactor).run_periodically(
            settings["CRAWLFLEET_PROXY_CHECK_INTERVAL"])
    reactor.run()

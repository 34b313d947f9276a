"""``crawlfleet site``: a site's configuration in ZooKeeper (rate, burst, adaptive delay, blacklist), and what applies.

``crawlfleet site`` prints the default rate; ``crawlfleet site show <host>`` what the workers apply to a site (its
rate or the default, the spacing of its hits, its adaptive delay, its robots.txt and any Retry-After block), read
from ZooKeeper and Redis directly. Changes go through Kafka like every request (``rate``, ``blacklist``), answered by
the Redis monitor once ZooKeeper holds them; workers apply them within a second.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import click

from deploy.cli_errors import require_zookeeper
from deploy.cli_messaging import _finish, _json_option, _timeout_option, _user_option, ask, console
from frontier.adaptive import AdaptiveDelay
from frontier.robots_cache import RobotsCache, authority
from messaging import clients, keys
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.domains import domain_of
from messaging.settings import load
from messaging.siteconfig import Rate, SitePaths, effective, read_defaults, read_site


def _describe(rate: dict[str, Any]) -> str:
    text = Rate(rate["rate"], rate["window"], rate.get("burst") or 1, bool(rate.get("adaptive"))).describe()
    return text + (" [default]" if rate.get("default") else "")


@click.group("site", invoke_without_command=True)
@_json_option
@click.pass_context
def site(context: click.Context, as_json: bool) -> None:
    """Show (no command: the default rate) or change a site's configuration in ZooKeeper (rate limit, burst,
    adaptive delay, blacklist); workers apply changes within a second."""
    if context.invoked_subcommand is not None:
        return
    settings = load()
    require_zookeeper(settings)
    zk = clients.zk_client(settings)
    try:
        defaults = read_defaults(zk, SitePaths(settings.zk_root))
    finally:
        zk.stop()
        zk.close()
    if as_json:
        click.echo(json.dumps({"default": {"rate": defaults.hits, "window": defaults.window,
                                           "spacing": defaults.spacing if defaults.hits else None}}))
        return
    console.print(f"default rate: {defaults.describe()}, for every site without its own "
                  f"(`crawlfleet site rate <host> N --window W`)")
    console.print("commands: show, rate, blacklist (`crawlfleet site --help`)")


def _render_site(result: dict[str, Any]) -> None:
    config = result["site"]
    listed = "blacklisted" if config["blacklisted"] else "not blacklisted"
    applied = _describe(result["effective"]) if result.get("effective") else "?"
    console.print(f"{result['domain']}: {applied}, {listed} ({result['path']})")


@site.command("rate")
@click.argument("domain")
@click.argument("hits", type=int, required=False)
@click.option("--window", type=float, default=None, help="Window in seconds (default: the site's, or the default).")
@click.option("--burst", type=click.IntRange(min=1), default=None,
              help="Hits that may go out at once after a quiet spell (default 1: evenly spaced).")
@click.option("--adaptive/--no-adaptive", default=None,
              help="Let the site's response times and errors slow its spacing down (cluster-wide AutoThrottle).")
@click.option("--remove", is_flag=True, help="Remove the site's own rate (the default applies again).")
@click.option("--host", "exact_host", is_flag=True,
              help="Configure this host name alone (crawls partitioned by host), not its registered domain.")
@_user_option
@_timeout_option
@_json_option
def site_rate(domain: str, hits: int | None, window: float | None, burst: int | None, adaptive: bool | None,
              remove: bool, exact_host: bool, userid: str, timeout: float | None, as_json: bool) -> None:
    """Allow HITS requests per window on DOMAIN, cluster-wide, spaced window/HITS apart (or --remove the site's own
    rate). A host is reduced to its registered domain, whose rate applies to all its hosts, unless --host: the
    host's own rate, which a crawl partitioned by host applies to it instead of its domain's."""
    if remove == (hits is not None):
        raise click.UsageError("give either HITS or --remove")
    request: dict[str, Any] = {"action": "rate-remove" if remove else "rate", "userid": userid, "domain": domain}
    if exact_host:
        request["host"] = True
    if not remove:
        request["rate"] = hits
        for name, value in (("window", window), ("burst", burst), ("adaptive", adaptive)):
            if value is not None:
                request[name] = value
    _finish(ask(request, timeout), as_json, _render_site)


@site.command("blacklist")
@click.argument("domain")
@click.option("--remove", is_flag=True, help="Take the site off the blacklist.")
@click.option("--host", "exact_host", is_flag=True, help="This host name alone, not its registered domain.")
@_user_option
@_timeout_option
@_json_option
def site_blacklist(domain: str, remove: bool, exact_host: bool, userid: str, timeout: float | None,
                   as_json: bool) -> None:
    """Stop crawling DOMAIN (or --remove it from the blacklist); a host is reduced to its registered domain unless
    --host."""
    request: dict[str, Any] = {"action": "blacklist-remove" if remove else "blacklist", "userid": userid,
                               "domain": domain}
    if exact_host:
        request["host"] = True
    _finish(ask(request, timeout), as_json, _render_site)


def _has_port(host: str) -> bool:
    return ":" in host.rsplit("]", 1)[-1]


def _robots_hosts(redis: Any, domain: str, host: str) -> list[str]:
    """The hosts (``name`` or ``name:port``) whose robots.txt is cached for what was asked: exactly ``host`` when it
    names a port, else that host name on any port (the demo web and many sites serve on a port of their own)."""
    exact = [host] if redis.exists(keys.robots(domain, host)) else []
    if _has_port(host):
        return exact
    prefix = keys.robots(domain, host)
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + ":*"  # the host name as written, then any port
    return exact + sorted(as_text(key)[len(prefix) - len(host):] for key in redis.scan_iter(match=pattern,
                                                                                          count=1000))


def _asked(text: str) -> tuple[str, str]:
    """(host as asked, with its port if any; a URL for it) from ``news.example.com``, ``host:8080`` or a URL."""
    parts = urlsplit(text if "://" in text else f"//{text}")
    host = authority(f"http://{parts.netloc}/")
    if not parts.hostname:
        raise click.BadParameter(f"{text!r} is not a host name", param_hint="HOST")
    return host, f"http://{host}/"


@site.command("show")
@click.argument("host")
@_json_option
def site_show(host: str, as_json: bool) -> None:
    """What the workers apply to HOST's site now: rate, spacing, adaptive delay, robots.txt, block. HOST may name a
    port (robots.txt is per host and port); without one, the host's robots.txt on any port is shown."""
    settings = load()
    host, url = _asked(host)
    domain = domain_of(url)
    require_zookeeper(settings)
    zk = clients.zk_client(settings)
    redis = clients.redis_client(settings)
    try:
        paths = SitePaths(settings.zk_root)
        config = read_site(zk, paths, domain)
        applied = effective(config, read_defaults(zk, paths))
        now = RedisClock(redis).now()
        blocked_until = int(redis.get(keys.block(domain)) or 0) / 1e6
        state = AdaptiveDelay(redis).state(domain)
        cache = RobotsCache(redis, None)
        robots = {}
        for cached_host in _robots_hosts(redis, domain, host):
            rules = cache.cached(f"http://{cached_host}/")
            ttl = redis.pttl(keys.robots(domain, cached_host))
            if rules is not None:
                robots[cached_host] = {"crawl_delay": rules.crawl_delay(settings.robotstxt_user_agent),
                                       "expires_in": ttl / 1000 if ttl and ttl > 0 else None}
    finally:
        zk.stop()
        zk.close()
        redis.close()
    delay = state.delay if applied["adaptive"] else 0.0
    spacing = max(applied["spacing"] or 0.0, delay) if applied["rate"] else None
    sampled_ago = now - state.at if state.at else None
    shown = {
        "domain": domain, "host": host, "path": paths.site(domain), "effective": applied,
        "spacing_now": spacing,
        "adaptive": {"delay": state.delay, "latency": state.latency, "errors": state.errors,
                     "sampled_ago": sampled_ago},
        "robots": {"cached": bool(robots), "hosts": robots,
                   "crawl_delay": next((r["crawl_delay"] for r in robots.values()), None),
                   "expires_in": next((r["expires_in"] for r in robots.values()), None)},
        "blocked_for": max(0.0, blocked_until - now) if blocked_until > now else None,
    }
    if as_json:
        click.echo(json.dumps(shown, sort_keys=True))
        return
    console.print(f"[bold]{domain}[/] ({paths.site(domain)})")
    console.print(f"  rate:      {_describe(applied)}" + ("  BLACKLISTED" if applied["blacklisted"] else ""))
    console.print(f"  spacing:   {'none allowed' if spacing is None else f'{spacing:g} s between hits'}"
                  f" (per spider type and per host IP)")
    if applied["adaptive"]:
        ago = f", last sample {sampled_ago:.0f} s ago" if sampled_ago is not None else ", no sample yet"
        console.print(f"  adaptive:  delay {state.delay:g} s (latency {state.latency:g} s, {state.errors} errors "
                      f"in a row{ago})")
    else:
        console.print("  adaptive:  off")
    if not robots:
        anywhere = "" if _has_port(host) else " on any port"
        console.print(f"  robots:    not cached for {host}{anywhere} (fetched before its first page)",
                      highlight=False, soft_wrap=True)
    for cached_host, entry in robots.items():
        expires = f", expires in {entry['expires_in']:.0f} s" if entry["expires_in"] else ""
        crawl_delay = f"{entry['crawl_delay']:g}" if entry["crawl_delay"] else "none"
        console.print(f"  robots:    cached for {cached_host}{expires}; Crawl-delay {crawl_delay}", highlight=False,
                      soft_wrap=True)
    blocked = shown["blocked_for"]
    console.print(f"  block:     {'none' if blocked is None else f'{blocked:.0f} s left (Retry-After)'}")

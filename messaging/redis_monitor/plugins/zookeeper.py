"""ZooKeeper plugin (seed 4.1.3.3): rate, rate-remove, blacklist, blacklist-remove of one site.

Writes ``<CRAWLFLEET_ZK_ROOT>/sites/<domain>`` with compare-and-set (:func:`messaging.siteconfig.update_site`), so two
monitors changing different fields of one site never lose each other's change. The requested host is reduced to its
domain (eTLD+1, whose config applies to every host of it), unless the request says ``"host": true``: then the host
name itself is configured (what a crawl partitioned by host applies to that host's queue before its domain's,
``messaging.siteconfig.site_names``); the answer says which name was changed.

A change that meets ZooKeeper away or just back (``ConnectionLoss``, ``SessionExpiredError`` while the client opens a
new session) is retried for up to SITE_RETRY_SECONDS, not answered with the error: a rate change sent as ZooKeeper
returns from an outage once came back ``SessionExpiredError`` and was dropped. The request's lock is renewed
meanwhile (``messaging.redis_monitor.lease``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kazoo.retry import KazooRetry

from messaging.domains import check_host, domain_of_host
from messaging.redis_monitor.plugins import Context, Plugin
from messaging.siteconfig import SiteConfig, SitePaths, effective, read_defaults, update_site

SITE_RETRY_SECONDS = 60.0  # how long a site change waits for ZooKeeper before it is answered with the error


def _retry(deadline: float = SITE_RETRY_SECONDS) -> KazooRetry:
    """Retries on a lost connection and on an expired session (a new one is on its way), 0.1 s growing to 1 s."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_jitter=0.2, max_delay=1.0, deadline=deadline,
                      ignore_expire=True)


def change_for(request: dict[str, Any]) -> Any:
    action = request["action"]
    if action == "rate":
        def change(config: SiteConfig) -> SiteConfig:
            window = float(request["window"]) if request.get("window") is not None else config.window
            burst = int(request["burst"]) if request.get("burst") is not None else config.burst
            adaptive = bool(request["adaptive"]) if request.get("adaptive") is not None else config.adaptive
            return dataclasses.replace(config, rate=int(request["rate"]), window=window, burst=burst,
                                       adaptive=adaptive)
    elif action == "rate-remove":
        def change(config: SiteConfig) -> SiteConfig:
            return dataclasses.replace(config, rate=None, window=None, burst=None, adaptive=None)
    elif action in ("blacklist", "blacklist-remove"):
        def change(config: SiteConfig) -> SiteConfig:
            return dataclasses.replace(config, blacklisted=action == "blacklist")
    else:
        raise ValueError(f"unknown site action {action!r}")
    return change


class ZookeeperPlugin(Plugin):
    name = "zookeeper"
    kind = "site"

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        paths = SitePaths(context.settings.zk_root)
        domain = check_host(request["domain"].strip().rstrip(".").lower()) if request.get("host") else \
            domain_of_host(request["domain"])
        config = _retry()(update_site, context.zk(), paths, domain, change_for(request))
        return {"action": request["action"], "domain": domain, "path": paths.site(domain),
                "site": {"rate": config.rate, "window": config.window, "blacklisted": config.blacklisted},
                "effective": effective(config, read_defaults(context.zk(), paths))}

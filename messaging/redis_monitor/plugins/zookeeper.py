"""ZooKeeper plugin (seed 4.1.3.3): rate, rate-remove, blacklist, blacklist-remove of one site.

Writes ``<CRAWLFLEET_ZK_ROOT>/sites/<domain>`` with compare-and-set (:func:`messaging.siteconfig.update_site`), so two
monitors changing different fields of one site never lose each other's change. The requested host is reduced to its
domain (eTLD+1, as workers key their throttles), and the answer says which domain was changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from messaging.domains import domain_of_host
from messaging.redis_monitor.plugins import Context, Plugin
from messaging.siteconfig import SiteConfig, SitePaths, update_site


def change_for(request: dict[str, Any]) -> Any:
    action = request["action"]
    if action == "rate":
        def change(config: SiteConfig) -> SiteConfig:
            window = float(request["window"]) if request.get("window") is not None else config.window
            return dataclasses.replace(config, rate=int(request["rate"]), window=window)
    elif action == "rate-remove":
        def change(config: SiteConfig) -> SiteConfig:
            return dataclasses.replace(config, rate=None, window=None)
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
        domain = domain_of_host(request["domain"])
        config = update_site(context.zk(), paths, domain, change_for(request))
        return {"action": request["action"], "domain": domain, "path": paths.site(domain),
                "site": {"rate": config.rate, "window": config.window, "blacklisted": config.blacklisted}}

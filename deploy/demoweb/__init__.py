"""The bundled demo web: deterministic, offline news sites on loopback addresses (demo, tests, benchmarks).

Sites live under ``*.fleet.test``, each on its own ``127.0.0.x`` and all on one port; the run's hosts file
(``CRAWLFLEET_HOSTS_FILE``) maps the names, so Scrapy (through ``spiders.resolver``) and every other client
resolve them without ``/etc/hosts``. Start it with ``crawlfleet demoweb up`` or :func:`start_demoweb`. What
it serves, and so what a complete crawl finds, is in its manifest (:func:`manifest`, or
``/_demoweb/manifest.json`` on any site).
"""

from deploy.demoweb.runner import DemoWebError, demoweb_status, fetch, site_url, start_demoweb, stop_demoweb
from deploy.demoweb.sites import DEFAULT_PAGES, DOMAIN, base_url, build_sites, manifest

__all__ = [
    "DEFAULT_PAGES",
    "DOMAIN",
    "DemoWebError",
    "base_url",
    "build_sites",
    "demoweb_status",
    "fetch",
    "manifest",
    "site_url",
    "start_demoweb",
    "stop_demoweb",
]

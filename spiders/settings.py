"""Scrapy settings of the crawlfleet project (``SCRAPY_SETTINGS_MODULE=spiders.settings``, see scrapy.cfg).

Deployment-specific values (service URLs, the hosts file, the worker's identity) do not live here: components
read them from :func:`messaging.settings.load` (``CRAWLFLEET_*`` environment variables and the local run's
state file; any ``CRAWLFLEET_*`` name set here or with ``-s`` overrides the environment). This module holds what is
the same for every worker of the fleet: the fleet's add-on (its components, in their order) and Scrapy's limits.
"""

# --- project ------------------------------------------------------------------------------------------------
BOT_NAME = "crawlfleet"
SPIDER_MODULES = ["spiders.spiders"]
NEWSPIDER_MODULE = "spiders.spiders"

# --- the fleet: tasks from Redis, children to seeds -----------------------------------------------------------
# The fleet's scheduler, dupefilter, spider and downloader middlewares and item pipelines, declared once in the add-on
# (spiders/addon.py lists them with their orders). A spider that needs none of the fleet's services switches it off
# with "ADDONS": {"spiders.addon.FleetAddon": None} in its custom_settings; plain Scrapy with -s ADDONS={}.
ADDONS = {"spiders.addon.FleetAddon": 0}

# Prometheus /metrics of this worker (responses by status, hits per site, items, leases; CPU and memory), and on the
# same port /livez and /readyz (reactor, feed thread and heartbeat turning; Redis answering, job registered); freed
# memory given back to the system every CRAWLFLEET_MALLOC_TRIM_INTERVAL seconds.
EXTENSIONS = {"spiders.metrics.WorkerMetrics": 500, "spiders.health.WorkerHealth": 510,
              "spiders.memory.MemoryTrim": 520}

# --- downloading ----------------------------------------------------------------------------------------------
# A static fetch is Scrapy's HTTP/1.1 handler; a render (meta["fleet_render"]) is Debian's headless Chromium through
# Playwright on the reactor's asyncio loop (spiders.render), started on the first render only.
DOWNLOAD_HANDLERS = {
    "http": "spiders.render.handler.RenderDownloadHandler",
    "https": "spiders.render.handler.RenderDownloadHandler",
}
# Where a redirect ends is checked against the crawl's Bloom filter by the scheduler before it is fetched, and
# marked seen when the task completes (in the committer's batch): RedirectDedupMiddleware, which marks it with a
# blocking call in the reactor, is for plain Scrapy projects that use BloomDupeFilter without the fleet's scheduler.
# Politeness is cluster-wide (the politeness step: per spider type and per host IP, ZooKeeper rates), so Scrapy's
# per-process slot limits would only add a second, local brake.
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
DOWNLOAD_DELAY = 0
# Scrapy 2.19 starts this many asyncio tasks for every response to run its outputs through the item pipelines (100
# by default: a fifth of a worker's reactor time went to creating them); a page yields one item and some links.
CONCURRENT_ITEMS = 16
AUTOTHROTTLE_ENABLED = False
# robots.txt is obeyed by the politeness step through the cluster's shared cache (CRAWLFLEET_ROBOTSTXT_OBEY,
# matched for CRAWLFLEET_ROBOTSTXT_USER_AGENT), fetched once per host for the whole cluster.
ROBOTSTXT_OBEY = False
# Hostile pages: bodies (also once decompressed: gzip bombs) above the cap are dropped, redirect loops end.
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
REDIRECT_MAX_TIMES = 10
RETRY_TIMES = 2
COOKIES_ENABLED = True

# --- networking ---------------------------------------------------------------------------------------------
# Scrapy's caching resolver behind the host map of CRAWLFLEET_HOSTS_FILE, which maps the demo web's
# *.fleet.test names to loopback addresses. Only the settings module can set this: it is read when the reactor
# is set up, before any spider's custom_settings.
TWISTED_DNS_RESOLVER = "spiders.resolver.HostMapResolver"
# Scrapy's default reactor (asyncio) is kept: the renders (spiders.render) run Playwright on its asyncio loop.

# --- local processes ----------------------------------------------------------------------------------------
# Many workers share a host (and a test machine): a telnet console per process would only compete for ports.
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"

"""Scrapy settings of the crawlfleet project (``SCRAPY_SETTINGS_MODULE=spiders.settings``, see scrapy.cfg).

Deployment-specific values (service URLs, the hosts file, the worker's identity) do not live here: components
read them from :func:`messaging.settings.load` (``CRAWLFLEET_*`` environment variables and the local run's
state file). This module holds what is the same for every worker of the fleet.
"""

# --- project ------------------------------------------------------------------------------------------------
BOT_NAME = "crawlfleet"
SPIDER_MODULES = ["spiders.spiders"]
NEWSPIDER_MODULE = "spiders.spiders"

# --- networking ---------------------------------------------------------------------------------------------
# Scrapy's caching resolver behind the host map of CRAWLFLEET_HOSTS_FILE, which maps the demo web's
# *.fleet.test names to loopback addresses. Only the settings module can set this: it is read when the reactor
# is set up, before any spider's custom_settings.
TWISTED_DNS_RESOLVER = "spiders.resolver.HostMapResolver"
# Scrapy's default reactor (asyncio) is kept: nothing in the project needs another.

# --- politeness ---------------------------------------------------------------------------------------------
ROBOTSTXT_OBEY = True

# --- local processes ----------------------------------------------------------------------------------------
# Many workers share a host (and a test machine): a telnet console per process would only compete for ports.
TELNETCONSOLE_ENABLED = False

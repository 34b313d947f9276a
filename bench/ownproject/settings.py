"""Settings of the benchmark's plain Scrapy project (``SCRAPY_SETTINGS_MODULE=bench.ownproject.settings``).

Nothing of the fleet is listed here: ``bench.crawl_project`` runs the spider as it is, and on the fleet with the
fleet's add-on given on the command line (``-s ADDONS=…``), as a user's project without eggs runs it. The one line
a user's project would not have is the resolver: the benchmark's sites are ``*.fleet.test`` names on loopback
addresses (``CRAWLFLEET_HOSTS_FILE``).
"""

BOT_NAME = "benchproject"
SPIDER_MODULES = ["bench.ownproject.spiders"]
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
TWISTED_DNS_RESOLVER = "spiders.resolver.HostMapResolver"

"""crawlfleet's own Scrapy signals (sent with ``crawler.signals.send_catch_log``, like Scrapy's)."""

storage_backlog = object()
"""The MongoDB pipeline's buffer filled up (``full=True``) or drained below half (``full=False``); kwargs: ``full``,
``waiting`` (items not yet written). The scheduler stops taking tasks while it is full."""

storage_state = object()
"""The item store has refused every write for a few seconds (kwarg ``state``: a ``messaging.storage.StoreState``,
sent every second while it lasts), or takes writes again (``state=None``, once). The worker's heartbeat reports it
to the cluster (``workers:{workers}:stores``)."""

domain_blocked = object()
"""A site answered 429/503: its domain is blocked for the cluster; kwargs: ``domain``, ``until`` (this process's
``time.monotonic()``). The scheduler holds back tasks of the domain it had already leased until then."""

download_samples = object()
"""Downloads ended (``spiders.middlewares.adaptive``, a batch every quarter of a second at most): kwarg ``samples``,
a list of ``(site, latency, status, error)``: the queue key the hit counted on (``spiders.worker.gate.site_of``: a
domain, a host or an address, as the crawl is partitioned), latency in seconds, status 0 for no response, error for
a 5xx, a timeout or a connection error. The scheduler reports those of adaptive sites to the cluster's shared delay
(``frontier.adaptive``)."""

item_stored = object()
"""The fleet's store of one's own spider's items (``spiders.pipelines.own_items``) has an item for good: kwargs
``item``, ``response`` (the page, or the failure its errback saw), ``stored`` (False: refused for good). The task
tracker settles the item then, not when the project's pipelines passed it on (``item_scraped``)."""

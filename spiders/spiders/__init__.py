"""crawlfleet's spiders (``SPIDER_MODULES``): the ``list`` and ``universal`` spider types."""

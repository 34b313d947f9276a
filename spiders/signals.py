"""crawlfleet's own Scrapy signals (sent with ``crawler.signals.send_catch_log``, like Scrapy's)."""

storage_backlog = object()
"""The MongoDB pipeline's buffer filled up (``full=True``) or drained below half (``full=False``); kwargs: ``full``,
``waiting`` (items not yet written). The scheduler stops taking tasks while it is full."""

"""crawlfleet spiders floor."""

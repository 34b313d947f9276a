"""crawlfleet messaging floor."""

"""crawlfleet master floor."""

"""crawlfleet bench floor."""

"""crawlfleet manager floor."""

"""crawlfleet deploy floor."""

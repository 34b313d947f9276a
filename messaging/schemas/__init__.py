"""JSON Schemas of crawlfleet's requests and rules (data files; loaded by messaging.validation)."""

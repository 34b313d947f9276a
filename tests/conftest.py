"""Shared fixtures: real local services with per-test isolation, child processes, the demo web."""

pytest_plugins = ["tests.plugins.services", "tests.plugins.demoweb", "tests.plugins.fleet", "tests.plugins.pywb"]

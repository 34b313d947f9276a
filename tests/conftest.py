"""Shared fixtures: real local services with per-test isolation, child processes, the demo web, the browser."""

pytest_plugins = [
    "tests.plugins.services",
    "tests.plugins.demoweb",
    "tests.plugins.fleet",
    "tests.plugins.pywb",
    "tests.plugins.browser",
    "tests.plugins.scrapydweb",
    "tests.plugins.shop_site",
]

"""The bridge from Scrapy's settings to crawlfleet's: :func:`crawlfleet_settings`.

Every component reads deployment values (service URLs, the hosts file, the worker's identity, the CRAWLFLEET_*
tunables) from :func:`messaging.settings.load`; a CRAWLFLEET_* name set in the Scrapy settings (the settings module,
a spider's ``custom_settings``, ``-s``) overrides the environment, and its source reads ``scrapy``.
"""

from __future__ import annotations

from typing import Any

from messaging.settings import SETTINGS, Settings, load


def crawlfleet_settings(scrapy_settings: Any = None) -> Settings:
    """crawlfleet's settings, where any CRAWLFLEET_* name set in the Scrapy settings overrides the environment.

    Read once per crawler: the result for frozen Scrapy settings (a running crawler's) is kept on them, so the many
    components that ask share one object.
    """
    if scrapy_settings is not None and getattr(scrapy_settings, "frozen", False):
        cached = getattr(scrapy_settings, _CACHE, None)
        if cached is None:
            cached = _resolve(scrapy_settings)
            setattr(scrapy_settings, _CACHE, cached)
        return cached
    return _resolve(scrapy_settings)


_CACHE = "_crawlfleet_settings"


def _resolve(scrapy_settings: Any) -> Settings:
    settings = load()
    if scrapy_settings is None:
        return settings
    overrides = {name: scrapy_settings.get(name) for name in SETTINGS if scrapy_settings.get(name) is not None}
    if not overrides:
        return settings
    values = {**settings, **{name: _parse(name, value) for name, value in overrides.items()}}
    return Settings(values, {name: "scrapy" if name in overrides else settings.source(name) for name in values})


def _parse(name: str, value: Any) -> Any:
    return SETTINGS[name].parse(value) if isinstance(value, str) else value

"""A random browser User-Agent per request, in place of Scrapy's single ``USER_AGENT``.

``DOWNLOADER_MIDDLEWARES = {"scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
"spiders.middlewares.useragent.RotatingUserAgentMiddleware": 500}``. The list comes from the ``USER_AGENTS``
setting (a list), else from ``USER_AGENTS_FILE``, else from the bundled ``user_agents.txt`` (current desktop and
mobile Chrome, Edge, Firefox and Safari; one per line, ``#`` comments). A request that already carries a
User-Agent header (set by a spider or a crawl's headers) keeps it.

robots.txt rules are matched for CRAWLFLEET_ROBOTSTXT_USER_AGENT (and Scrapy's ROBOTSTXT_USER_AGENT), never for
the rotating header: a site's rules for "Chrome" must not decide what crawlfleet may fetch.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from scrapy import Request

BUNDLED = Path(__file__).with_name("user_agents.txt")


def read_user_agents(path: str | Path) -> list[str]:
    """The User-Agents of a file: one per line; blank lines and ``#`` comments are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


class RotatingUserAgentMiddleware:
    def __init__(self, user_agents: list[str], rng: random.Random | None = None) -> None:
        if not user_agents:
            raise ValueError("no User-Agents to rotate")
        self.user_agents = list(user_agents)
        self.rng = rng or random.Random()

    @classmethod
    def from_crawler(cls, crawler: Any) -> RotatingUserAgentMiddleware:
        settings = crawler.settings
        agents = settings.getlist("USER_AGENTS") or read_user_agents(settings.get("USER_AGENTS_FILE") or BUNDLED)
        return cls(agents)

    def process_request(self, request: Request, spider: Any = None) -> None:
        request.headers.setdefault(b"User-Agent", self.rng.choice(self.user_agents))
        return None

"""Pages that need a browser (issue 27, seed 6.2): rendering in the worker's normal request path, with Playwright.

A crawl rule's ``render`` (``never`` by default, ``always``, ``auto``) decides per request whether its download is a
static HTTP fetch or a render in Debian's headless Chromium. The render *is* the download of the task's request, so
everything around a download stays as it is: the politeness step took the task (a render is one hit of the cluster
throttle), robots.txt was checked for the page, the proxy chosen for the task and the User-Agent of the request are
the browser's, a 429/503 with Retry-After blocks the domain, the task's lease, its children through the Bloom filter
and the kill -9 guarantees are the scheduler's, unchanged.

- :mod:`spiders.render.handler`: the ``http``/``https`` download handler: Scrapy's HTTP/1.1 handler for a static
  fetch, the browser pool for a request whose ``meta["fleet_render"]`` is true;
- :mod:`spiders.render.browser`: one browser per worker, launched on the first render, contexts per proxy recycled
  every ``CRAWLFLEET_RENDER_CONTEXT_PAGES``, a page pool of ``CRAWLFLEET_RENDER_PAGES``;
- :mod:`spiders.render.page`: one render: blocked resource types, same-host sub-requests capped, a hard deadline;
- :mod:`spiders.render.middleware`: the downloader middleware that decides (``auto``: static first, rendered when
  :mod:`spiders.render.detect` says the static page lacks what the rule needs), learns per site
  (:mod:`spiders.render.learn`) and counts rendered and static pages.
"""

from spiders.render.modes import ALWAYS, AUTO, MODES, NEVER, render_mode

__all__ = ["ALWAYS", "AUTO", "MODES", "NEVER", "render_mode"]

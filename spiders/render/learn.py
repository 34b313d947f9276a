"""``render: auto`` learns per site, per worker: after K pages, the browser straight away or not at all.

Each worker keeps, per site (the host), what the last ``pages`` (K) judged pages of ``render: auto`` crawls showed:

- ``static``: the static page had what the rule needs (not rendered);
- ``needed``: it lacked it and the render gave more (more complete items, links or main text);
- ``vain``: it lacked it by the guess of :mod:`spiders.render.detect`, but the render gave nothing more.

When the last K were all ``needed``, the site is learned as *browser*: its pages are rendered without the static
fetch first. When none of the last K was ``needed`` and at least one was ``vain``, it is learned as *static*: its
pages are no longer rendered on a guess. In between (a site of static and client-rendered pages) every page is
judged. A learned site still has one page in ``recheck`` judged both ways (a static fetch, then a render if the
guess says so), so a site that changes is learned again.

Per worker, not shared in Redis: the decision is needed on the reactor for every request, where the worker makes no
Redis call; K pages are a few seconds of one worker's crawl, and each worker's counts are its own evidence. Memory:
at most ``max_sites`` sites are kept (the oldest forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

STATIC, NEEDED, VAIN = "static", "needed", "vain"
BROWSER_SITE, STATIC_SITE, MIXED_SITE = "browser", "static", "mixed"


@dataclass
class _Site:
    last: deque[str]
    seen: int = 0  # pages asked about since the site was learned (for the re-check turn)
    learned: str = MIXED_SITE
    history: dict[str, int] = field(default_factory=dict)


class SiteLearner:
    def __init__(self, pages: int = 20, recheck: int = 25, max_sites: int = 10_000) -> None:
        if pages < 1 or recheck < 1:
            raise ValueError("pages and recheck must be at least 1")
        self.pages = pages
        self.recheck = recheck
        self.max_sites = max_sites
        self._sites: OrderedDict[str, _Site] = OrderedDict()

    def state(self, site: str) -> str:
        entry = self._sites.get(site)
        return entry.learned if entry is not None else MIXED_SITE

    def render_first(self, site: str) -> bool:
        """Render this site's next page without a static fetch first (learned *browser*, not a re-check turn)."""
        entry = self._sites.get(site)
        return entry is not None and entry.learned == BROWSER_SITE and not self._recheck_turn(entry)

    def may_render(self, site: str) -> bool:
        """Whether a static page the guess finds lacking may be rendered (not for a learned *static* site, but for
        its re-check turn)."""
        entry = self._sites.get(site)
        return entry is None or entry.learned != STATIC_SITE or self._recheck_turn(entry)

    def record(self, site: str, verdict: str) -> None:
        if verdict not in (STATIC, NEEDED, VAIN):
            raise ValueError(f"unknown verdict {verdict!r}")
        entry = self._entry(site)
        entry.last.append(verdict)
        entry.history[verdict] = entry.history.get(verdict, 0) + 1
        learned = MIXED_SITE
        if len(entry.last) >= self.pages:
            if all(v == NEEDED for v in entry.last):
                learned = BROWSER_SITE
            elif NEEDED not in entry.last and VAIN in entry.last:
                learned = STATIC_SITE
        if learned != entry.learned:
            entry.learned, entry.seen = learned, 0

    def _recheck_turn(self, entry: _Site) -> bool:
        entry.seen += 1
        return entry.seen % self.recheck == 0

    def _entry(self, site: str) -> _Site:
        entry = self._sites.get(site)
        if entry is None:
            entry = self._sites[site] = _Site(deque(maxlen=self.pages))
            while len(self._sites) > self.max_sites:
                self._sites.popitem(last=False)
        else:
            self._sites.move_to_end(site)
        return entry

"""The politeness rules: how fast the cluster may hit a domain, and what of it may be fetched at all.

:class:`Politeness` holds the rules and asks nothing of Redis; the frontier's client (:mod:`frontier.client`) applies
them in its atomic steps (``lua/take.lua``, ``lua/reserve.lua``): it asks :meth:`Politeness.pace` for a domain's
pacing, :meth:`Politeness.verdict` for robots.txt's answer on a queue's head, and :meth:`Politeness.is_blacklisted`
before it steps at all.

**Rates.** The site's rate and window from ZooKeeper (:class:`~frontier.config_watch.SiteConfigWatch`, else the
defaults) apply to both throttle keys — this spider type on every host (``<spider_type>:{d}:…``, seed 4.2.2.2) and
this host on every spider type (``<ip>:{d}:…``, seed 4.2.2.3); a robots.txt ``Crawl-delay`` that is known and
stricter lowers the rate to one hit per ``delay`` seconds (:meth:`Politeness.effective_rate`).

**Paced hits** (``lua/pace.lua``). A rate of N hits per W seconds means hits spaced W/N apart, for every worker of
the cluster together: each throttle key has a token bucket (``<owner>:{d}:pace``) that refills one token per W/N
seconds up to the site's ``burst`` (default 1: no two hits closer than W/N), and the exact sliding window
(``<owner>:{d}:throttle``) stays as the upper bound: both hold. A site with ``adaptive`` set is spaced at least
its shared adaptive delay apart (``frontier.adaptive``).

**Where the clock is read: when the request goes out, not when it is leased.** A leased task used to wait in the
worker's prefetch buffer, and tasks leased one by one could leave together after a stall of the downloader: the
site saw more hits in a window than the cluster had counted. Now the step hands out, with the lease, the slot at
which the hit was recorded (``Lease.not_before``), and the worker's scheduler hands the request to the downloader
no earlier than the slot and no later than ``Lease.slack`` after it less the request's way to the site (0.1 s, at
most half the slack: ``spiders.worker.gate.admission``; the slack: a fifth of the spacing, at least
CRAWLFLEET_PACE_SLACK and at least CRAWLFLEET_PACE_SLACK_SHARE of the site's window plus that way out: a busy
worker's leases wait a tenth of a second or more for the downloader, and a slack shorter than that wait would make
most of them miss their slot and reserve again). The slot
is put on the worker's clock with the offset of the fastest recent replies (``messaging.clock.RedisTimeMap``), not
with that of the reply that carried it, which may have been read late. A request that missed its span withdraws
its hit and reserves a new slot
(:meth:`frontier.client.FrontierClient.reserve`, ``lua/reserve.lua``) before it goes; so does every follow-up that
the worker sends by itself (a redirect, a retry), since the site sees it as another hit. The windows are checked
``slack`` wider than the site's window, so the hits the site sees — each within ``slack`` after its recorded time —
never number more than N in any W seconds. Every hit of a site gets the same slack (a function of the site's rate
alone: :meth:`Politeness.slack_floor`), which is what that check needs; its cost is the slack's share of the window,
at most CRAWLFLEET_PACE_SLACK_SHARE of the rate when the window binds beyond the floors. We chose a slot handed out
with the lease over recording the hit at hand-out (that would cost the reactor a Redis round trip per request, or a
thread hop that adds its own delay) and over shortening the prefetch (a shorter buffer only makes the bunching
rarer, it does not bound it). The horizon (CRAWLFLEET_PACE_HORIZON) keeps reservations short, so a worker never
holds a site's next minutes, and a rate changed live applies within the horizon.

**robots.txt** rules are checked in Python (protego, :class:`~frontier.robots_cache.RobotsCache`) on the queue head
*before* the step, and the step pops only if the head is still that task, so a disallowed URL never spends a hit or
a lease. **Blocks**: a 429/503 holds the domain for its Retry-After (:func:`retry_after_seconds`).

What the steps did is counted in one :class:`Tally` (this process, and the cluster's counters of
:data:`STATS_MODULE`), shared by the rules and the client.
"""

from __future__ import annotations

import email.utils
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frontier.config_watch import SiteRates
from messaging.clients import as_text
from messaging.domains import domain_of
from messaging.settings import default
from messaging.siteconfig import Rate

if TYPE_CHECKING:  # the cache imports the client, which imports these rules
    from frontier.robots_cache import RobotsCache

logger = logging.getLogger(__name__)

STATS_MODULE = "politeness"
US = 1_000_000
WAY_OUT = 0.1  # seconds a request handed to the downloader may take to reach the site (at most half its slack)


class Tally:
    """The politeness outcomes (taken, throttled, robots_disallowed, …): counted in this process (:attr:`counts`)
    and, with ``stats`` (``messaging.stats.Stats``), in the cluster's counters."""

    def __init__(self, stats: Any = None) -> None:
        self.stats = stats
        self.counts: Counter[str] = Counter()

    def incr(self, plugin: str, amount: int = 1) -> None:
        self.counts[plugin] += amount
        if self.stats is not None:
            try:
                self.stats.incr(plugin, amount)
            except Exception:  # counting must never stop a fetch
                logger.exception("could not count %s", plugin)


@dataclass(frozen=True)
class Pace:
    """How a domain's hits are spaced now, as the take and reserve scripts apply it (``lua/pace.lua``)."""

    rate: Rate
    slack_floor: int  # the least slack of a hit (us): Politeness.slack_floor
    horizon: int  # how far ahead a hit may be reserved (us)


class Politeness:
    """The throttle and pacing rules of one worker (its site rates, robots.txt, user agent and pacing settings)."""

    def __init__(
        self,
        rates: SiteRates,
        robots: RobotsCache | None = None,
        user_agent: str = "crawlfleet",
        *,
        horizon: float = default("CRAWLFLEET_PACE_HORIZON"),
        slack: float = default("CRAWLFLEET_PACE_SLACK"),
        slack_share: float = 0.0,
        stats: Any = None,
    ) -> None:
        self.rates = rates
        self.robots = robots
        self.user_agent = user_agent  # robots.txt's product token
        self.horizon = horizon  # how far ahead a step may reserve a hit (CRAWLFLEET_PACE_HORIZON)
        self.slack = slack  # the least time a request may leave after its slot (CRAWLFLEET_PACE_SLACK)
        self.slack_share = slack_share  # ...and the least share of the site's window (CRAWLFLEET_PACE_SLACK_SHARE)
        self.tally = Tally(stats)  # stats: messaging.stats.Stats or None, the cluster's counters

    @property
    def counts(self) -> Counter[str]:
        return self.tally.counts

    # --- pacing ---------------------------------------------------------------------------------------------------
    def effective_rate(self, domain: str) -> Rate:
        """The site's rate (or the default), lowered to the robots.txt Crawl-delay when one is known."""
        rate = self.rates.rate_for(domain)
        delay = self.robots.crawl_delay(domain, self.user_agent) if self.robots is not None else None
        if delay and delay > 0 and rate.hits * delay > rate.window:
            # "Crawl-delay: d" asks for d seconds between requests: one hit per d-second window, not d-spaced
            # hits bunched at the start of a longer window
            rate = Rate(1, delay, 1, rate.adaptive)
        return rate

    def slack_floor(self, rate: Rate) -> int:
        """The least slack (microseconds) of a hit at this rate: CRAWLFLEET_PACE_SLACK, or the share
        CRAWLFLEET_PACE_SLACK_SHARE of the window plus the request's way out (:data:`WAY_OUT`) when that is longer
        (the scripts raise it to a fifth of the spacing): the share is the time a request may wait for the
        downloader, the way out comes on top, so a busy worker's requests keep the whole share to leave in. It
        depends on the rate alone, so every hit of a site has the same slack and the windows' check stays exact."""
        share = rate.window * self.slack_share
        return int(max(self.slack, share + WAY_OUT if share > 0 else 0.0) * US)

    def pace(self, domain: str) -> Pace:
        """The pacing of the domain's next hit (read at every step: a rate changed live applies at once)."""
        rate = self.effective_rate(domain)
        return Pace(rate, self.slack_floor(rate), int(self.horizon * US))

    # --- what may be fetched --------------------------------------------------------------------------------------
    def is_blacklisted(self, domain: str) -> bool:
        return self.rates.is_blacklisted(domain)

    def admits(self, url_or_domain: str) -> bool:
        """Whether new links to this domain may be enqueued (not blacklisted); counts refusals."""
        domain = domain_of(url_or_domain) if "://" in url_or_domain else url_or_domain
        if self.rates.is_blacklisted(domain):
            self.tally.incr("blacklist_refused")
            return False
        return True

    @property
    def obeys_robots(self) -> bool:
        """Whether queue heads are checked against robots.txt before a step (it costs a read of the heads)."""
        return self.robots is not None

    def verdict(self, url: str, domain: str | None = None) -> bool | None:
        """Whether robots.txt allows ``url`` (a task of ``domain``'s queue); ``None`` while its host's rules are
        fetched or unreachable (wait :meth:`pending_wait`, do not drop the URL). A fetch this asks for is a hit on
        ``domain``, paced like its pages."""
        return True if self.robots is None else self.robots.allowed(url, self.user_agent, domain)

    def pending_wait(self, url: str) -> float:
        """How long a domain whose head's verdict is pending waits before it is asked again."""
        assert self.robots is not None  # a verdict is only pending when robots.txt is obeyed
        return self.robots.pending_wait(url)


def retry_after_seconds(value: str | bytes | None, now: float, default: float = 60.0) -> float:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if value is None:
        return default
    text = as_text(value).strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - now)

"""The feed's side of paused crawls (:mod:`messaging.pause`): hand back their tasks unfetched, take them up again.

A worker hears that a crawl was paused, resumed or stopped on ``crawls:states`` (the block listener's thread calls
:meth:`Pausing.changed`), and in any case reads its crawls' states every CRAWLFLEET_CRAWL_REFRESH. On the feed's
thread (:meth:`Pausing.turn`, every pass) it then:

- **pauses** (:meth:`Pausing._hold_back`): the leases of the crawl it took and has not handed out (the feed's
  ``ready``, the take's batch) are parked at once, their hits withdrawn (``FrontierClient.park``); its scheduler
  is told (``FeedListener.crawls_paused``) and hands back, through :meth:`Pausing.hand_back`, the requests it
  holds that have not gone out (waiting for their slot, a new slot, a follow-up's turn); what the job's queues hold of
  the crawl is parked (``FrontierClient.park_queued``). Requests already in Scrapy's downloader finish normally;
- **parks every task of a paused crawl it takes later** (:meth:`Pausing.park_taken`: a batch the master staged
  before the pause, a lease that expired and came back), before it costs a request;
- **resumes** (:meth:`Pausing._take_up`): the crawl's parked tasks go back into the job's queues and their domains
  into its ready index (``FrontierClient.unpark``), where the walk finds them at once.

The dispatcher's view of the job's backlog (``out``) follows what is parked and put back. Parked tasks belong to the
job: if the worker dies, the master puts them back into ``seeds`` with the rest (and parks them there if the crawl
is still paused), so a pause survives a worker restart.
"""

from __future__ import annotations

import logging
import queue
from collections import deque
from typing import TYPE_CHECKING, Any

from frontier.client import HandedBack, Lease

if TYPE_CHECKING:
    from spiders.worker.feed import TaskFeed
    from spiders.worker.take import Leased

logger = logging.getLogger(__name__)


def handed_back(leased: Leased) -> HandedBack:
    """A taken lease handed back: with the hit its slot holds and the address it was taken for (a proxy's)."""
    return HandedBack(leased.lease, leased.slot.hit if leased.slot is not None else "",
                      leased.proxy.address if leased.proxy is not None else None)


class Pausing:
    def __init__(self, feed: TaskFeed) -> None:
        self.feed = feed
        self.paused: set[str] = set()  # crawls whose tasks this worker holds back (its queues are parked)
        self._changed: queue.SimpleQueue[str] = queue.SimpleQueue()  # crawls whose state was announced
        self._returned: queue.SimpleQueue[HandedBack] = queue.SimpleQueue()  # handed back by the scheduler
        self.parked = 0  # tasks this worker parked (leases and queued), for its stats

    # --- any thread -----------------------------------------------------------------------------------------------
    def changed(self, crawlid: str, state: str = "") -> None:
        """A crawl's state was announced (``crawls:states``): it is read again on the feed's next pass."""
        self._changed.put(crawlid)
        self.feed.wake()

    def hand_back(self, lease: Lease, hit: str = "", ip: str | None = None) -> None:
        """A lease of a paused crawl whose request never went out (the scheduler's): parked on the next pass."""
        self.feed.unsent_done(lease.member)
        self._returned.put(HandedBack(lease, hit, ip))
        self.feed.wake()

    # --- the feed's thread ----------------------------------------------------------------------------------------
    def turn(self) -> None:
        """Read the states announced since the last pass, park what was handed back."""
        announced = _drain(self._changed)
        if announced:
            self.feed.catalog.load(announced, force=True)
            self.sync()
        returned = _drain(self._returned)
        if returned:
            try:
                self._park(returned)
            except Exception:
                for item in returned:  # parked on the next pass: nothing handed back is dropped on a Redis hiccup
                    self._returned.put(item)
                raise

    def sync(self) -> None:
        """Act on the states the catalog holds now: hold back the crawls paused since, take up those resumed."""
        now = self.feed.catalog.paused()
        if now - self.paused:
            self._hold_back(now - self.paused)
        if self.paused - now:
            self._take_up(self.paused - now)

    def park_taken(self, leased: Leased) -> None:
        """A task of a paused crawl was taken (before the pause was heard, or landed since): parked, unfetched."""
        if leased.lease.task.crawlid not in self.paused:
            self.sync()  # the pause itself: its queues are parked, its scheduler told
        self._park([handed_back(leased)])

    # --- internals ------------------------------------------------------------------------------------------------
    def _hold_back(self, crawls: set[str]) -> None:
        feed = self.feed
        with feed.lock:
            mine = [leased for leased in feed.ready if leased.lease.task.crawlid in crawls]
            feed.ready = deque(leased for leased in feed.ready if leased.lease.task.crawlid not in crawls)
        mine += feed.take.withdraw(crawls)
        self._park([handed_back(leased) for leased in mine])
        self.paused |= crawls
        feed.listener.crawls_paused(set(crawls))  # the scheduler hands back what it holds
        queued = feed.frontier.park_queued(feed.frontier.domains(), sorted(crawls))
        parked = sum(queued.values())
        if parked:
            feed.take.walk.lost += parked  # they left the queues: the ready gauges go down with the walk's next call
            feed.registry.add_outstanding({feed.info.job: -parked})
            self.parked += parked
        logger.info("crawls paused: %s; %d leased and %d queued tasks parked", ", ".join(sorted(crawls)), len(mine),
                    parked)

    def _take_up(self, crawls: set[str]) -> None:
        feed = self.feed
        for crawlid in sorted(crawls):
            info = feed.catalog.get(crawlid)
            self.paused.discard(crawlid)
            if info is None or not info.running:
                continue  # stopped (its parked tasks were purged with the rest) or gone
            domains = feed.frontier.parking.parked_domains(feed.frontier.domains())
            back = feed.frontier.unpark(domains, crawlid)
            for domain in back:
                feed.take.reopen(domain)
            if back:
                feed.registry.add_outstanding({feed.info.job: sum(back.values())})
            logger.info("crawl %s resumed: %d parked tasks back in the queues", crawlid, sum(back.values()))

    def _park(self, handed: list[HandedBack]) -> None:
        if not handed:
            return
        feed = self.feed
        parked = feed.frontier.park(handed)
        for item in handed:  # parked, or no longer held (expired and put back): not this worker's to renew
            feed.held.pop(item.lease.member, None)
            feed.unsent_done(item.lease.member)
        if parked:
            feed.registry.add_outstanding({feed.info.job: -len(parked)})
            self.parked += len(parked)
        # A lease handed back while its crawl's resume was being heard is parked after the crawl's take-up: it goes
        # back at once (this thread alone parks and takes up this job's tasks, so nothing slips between the two).
        for crawlid in {lease.task.crawlid for lease in parked} - self.paused:
            info = feed.catalog.get(crawlid)
            if info is None or not info.paused:
                domains = sorted({lease.domain for lease in parked if lease.task.crawlid == crawlid})
                back = feed.frontier.unpark(domains, crawlid)
                feed.registry.add_outstanding({feed.info.job: sum(back.values())})


def _drain(source: queue.SimpleQueue[Any]) -> list[Any]:
    items = []
    while True:
        try:
            items.append(source.get_nowait())
        except queue.Empty:
            return items

"""The scheduler's hand-out path (spiders.worker.scheduler): a request leaves within its slot's span, or gets a new
slot first — a leased task's request, one that missed its slot, a follow-up, and a slot beyond the horizon; a leased
task stays in the feed's prefetch until its request goes out."""

from __future__ import annotations

import time
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from frontier.client import Lease, SendSlot
from messaging.tasks import Task
from spiders.worker.scheduler import REASK_SECONDS, FleetScheduler

pytestmark = pytest.mark.unit
DOMAIN = "site.test"


class Feed:
    """What the scheduler asks of the feed: leases with their slots, and reservations (answered by the test)."""

    def __init__(self) -> None:
        self.ready: deque[Lease] = deque()
        self.send_at: dict[str, SendSlot] = {}
        self.proxy_of: dict[str, Any] = {}
        self.reserved: list[tuple[int, str, str, str | None]] = []
        self.paused = False
        self.unsent: set[str] = set()  # popped, request not sent: still in the prefetch (TaskFeed.sent)

    def lease(self, path: str, send_at: float, slack: float = 0.2) -> Lease:
        task = Task(url=f"http://{DOMAIN}{path}", crawlid="c", spider_type="list")
        lease = Lease(DOMAIN, task.encode(), time.time() + 600, hit=f"hit-{path}")
        self.ready.append(lease)
        self.send_at[lease.member] = SendSlot(DOMAIN, send_at, slack, lease.hit)
        return lease

    def pop(self) -> Lease | None:
        lease = self.ready.popleft() if self.ready else None
        if lease is not None:
            self.unsent.add(lease.member)
        return lease

    def sent(self, member: str | None) -> None:
        self.unsent.discard(member)

    def reserve(self, token: int, domain: str, withdrawn: str = "", ip: str | None = None) -> None:
        self.reserved.append((token, domain, withdrawn, ip))


class Tracker:
    def start(self, lease: Lease) -> Request:
        return Request(lease.task.url, meta={"task": lease.task, "task_member": lease.member})


@pytest.fixture
def scheduler() -> FleetScheduler:
    crawler = get_crawler(Spider)
    crawler.engine = SimpleNamespace(_slot=None)  # nudging the engine is a no-op here: the test calls next_request
    scheduler = FleetScheduler(crawler)
    scheduler.feed, scheduler.tracker = Feed(), Tracker()
    return scheduler


def test_a_request_leaves_in_its_slot_and_waits_for_an_early_one(scheduler: FleetScheduler) -> None:
    now = time.monotonic()
    scheduler.feed.lease("/later", now + 30)
    scheduler.feed.lease("/due", now - 0.01, slack=60)  # the span is wide: this test never depends on speed
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/due") and "fleet_slot" not in request.meta
    assert scheduler.next_request() is None  # /later waits for its slot, held, not sent and not re-reserved
    assert len(scheduler) == 1 and scheduler.feed.reserved == []
    assert scheduler.crawler.stats.get_value("fleet/pace/sent") == 1


def test_a_late_request_withdraws_its_hit_and_waits_for_a_new_slot(scheduler: FleetScheduler) -> None:
    scheduler.feed.lease("/late", time.monotonic() - 5, slack=0.2)  # the downloader could not take it in time
    assert scheduler.next_request() is None
    [(token, domain, withdrawn, _)] = scheduler.feed.reserved
    assert domain == DOMAIN and withdrawn == "hit-/late"
    assert scheduler.crawler.stats.get_value("fleet/pace/late") == 1
    scheduler._reserved(token, SendSlot(DOMAIN, time.monotonic() - 0.01, 60, "hit-new"))
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/late")


def test_a_follow_up_reserves_a_hit_of_its_own(scheduler: FleetScheduler) -> None:
    scheduler.feed.lease("/first", time.monotonic() - 0.01, slack=60)
    sent = scheduler.next_request()
    redirect = sent.replace(url=f"http://{DOMAIN}/moved")  # the redirect middleware copies the meta: slot spent
    scheduler._hold(redirect)
    assert scheduler.next_request() is None
    [(token, domain, withdrawn, _)] = scheduler.feed.reserved
    assert (domain, withdrawn) == (DOMAIN, "")
    # a slot beyond the horizon was not recorded: the request asks again within a second, without a slot
    far = time.monotonic() + 60
    scheduler._reserved(token, SendSlot(DOMAIN, far, 0.2, ""))
    not_before, _, held = scheduler._followups[0]
    assert held is redirect and "fleet_slot" not in held.meta
    assert not_before <= time.monotonic() + REASK_SECONDS


def test_a_leased_task_stays_in_the_prefetch_until_its_request_goes_out(scheduler: FleetScheduler) -> None:
    """A task waiting in the scheduler for its slot is still prefetched: the feed takes no more tasks in its place
    (else a paced site's slots, a whole horizon ahead, would let a worker hold leases beyond its prefetch)."""
    now = time.monotonic()
    later = scheduler.feed.lease("/later", now + 30)
    late = scheduler.feed.lease("/late", now - 5, slack=0.2)
    due = scheduler.feed.lease("/due", now - 0.01, slack=60)
    assert scheduler.next_request().url.endswith("/due")
    assert scheduler.feed.unsent == {later.member, late.member}  # one waits for its slot, one for a new slot
    [(token, _, _, _)] = scheduler.feed.reserved
    scheduler._reserved(token, SendSlot(DOMAIN, time.monotonic() - 0.01, 60, "hit-new"))
    assert scheduler.next_request().url.endswith("/late")
    assert scheduler.feed.unsent == {later.member}
    redirect = Request(f"http://{DOMAIN}/moved", meta={"task_member": due.member,
                                                      "fleet_slot": SendSlot(DOMAIN, now - 0.01, 60, "hit-r")})
    scheduler._hold(redirect)  # a follow-up of a task already sent: no change to the prefetch
    assert scheduler.next_request() is redirect and scheduler.feed.unsent == {later.member}


def test_late_requests_reserve_only_as_many_slots_as_the_downloader_has_room_for(scheduler: FleetScheduler) -> None:
    """A whole prefetch of late leases is not re-reserved at once: a slot reserved for a request the downloader cannot
    take yet would be missed again (one more reservation, one more hit withdrawn). The others wait, parked, and ask
    for their slot as places free up."""
    downloader = SimpleNamespace(total_concurrency=3, active={"busy"})  # two free places
    scheduler.crawler.engine = SimpleNamespace(_slot=None, downloader=downloader)
    for n in range(5):
        scheduler.feed.lease(f"/late{n}", time.monotonic() - 5, slack=0.2)
    assert scheduler.next_request() is None
    assert [withdrawn for _, _, withdrawn, _ in scheduler.feed.reserved] == ["hit-/late0", "hit-/late1"]
    assert len(scheduler) == 5 and len(scheduler.feed.unsent) == 5  # parked requests stay in the prefetch
    assert scheduler.next_request() is None and len(scheduler.feed.reserved) == 2  # no room: nothing more asked
    token = scheduler.feed.reserved[0][0]
    scheduler._reserved(token, SendSlot(DOMAIN, time.monotonic() - 0.01, 60, "hit-new"))
    downloader.active = {"other"}  # "busy" is done: two free places, one reservation under way
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/late0")
    assert [withdrawn for _, _, withdrawn, _ in scheduler.feed.reserved][2:] == ["hit-/late2"]
    downloader.active = set()  # three free places, two reservations under way: one more
    assert scheduler.next_request() is None
    assert [withdrawn for _, _, withdrawn, _ in scheduler.feed.reserved][3:] == ["hit-/late3"]
    assert len(scheduler) == 4 and scheduler.feed.unsent == {scheduler._parked[0][0].meta["task_member"]} | {
        request.meta["task_member"] for request in scheduler._reserving.values()}

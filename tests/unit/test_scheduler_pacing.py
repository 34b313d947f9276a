"""The scheduler's hand-out path (spiders.worker.scheduler and its send gate, spiders.worker.gate): a request leaves
within its slot's span, or gets a new slot first — a leased task's request, one that missed its slot, a follow-up,
and a slot beyond the horizon; a leased task stays in the feed's prefetch until its request goes out; a paused
crawl's requests that have not gone out are handed back to the feed with their hits. Time is the scheduler's
injected clock, which only the tests move."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from frontier.client import Lease, SendSlot
from messaging.clock import ManualClock
from messaging.tasks import Task
from spiders.worker.gate import EARLY, LATE, ON_TIME, REASK_SECONDS, admission, request_key
from spiders.worker.scheduler import FleetScheduler
from spiders.worker.take import Leased

pytestmark = pytest.mark.unit
DOMAIN = "site.test"
T0 = 1_000.0


class Feed:
    """What the scheduler asks of the feed: leases with their slots, and reservations (answered by the test)."""

    def __init__(self) -> None:
        self.ready: deque[Leased] = deque()
        self.reserved: list[tuple[int, str, str, str | None]] = []
        self.paused = False
        self.unsent: set[str] = set()  # popped, request not sent: still in the prefetch (TaskFeed.sent)
        self.handed_back: list[tuple[str, str, str | None]] = []  # (task url, hit, ip) of TaskFeed.hand_back

    def lease_of(self, path: str, send_at: float, crawlid: str = "c") -> Lease:
        task = Task(url=f"http://{DOMAIN}{path}", crawlid=crawlid, spider_type="list")
        lease = Lease(DOMAIN, task.encode(), T0 + 600, hit=f"hit-{path}")
        self.ready.append(Leased(lease, SendSlot(DOMAIN, send_at, 0.2, lease.hit)))
        return lease

    def hand_back(self, lease: Lease, hit: str = "", ip: str | None = None) -> None:
        self.unsent.discard(lease.member)
        self.handed_back.append((lease.task.url, hit, ip))

    def lease(self, path: str, send_at: float, slack: float = 0.2) -> Lease:
        task = Task(url=f"http://{DOMAIN}{path}", crawlid="c", spider_type="list")
        lease = Lease(DOMAIN, task.encode(), T0 + 600, hit=f"hit-{path}")
        self.ready.append(Leased(lease, SendSlot(DOMAIN, send_at, slack, lease.hit)))
        return lease

    def pop(self) -> Leased | None:
        leased = self.ready.popleft() if self.ready else None
        if leased is not None:
            self.unsent.add(leased.member)
        return leased

    def sent(self, member: str | None) -> None:
        self.unsent.discard(member)

    def reserve(self, token: int, domain: str, withdrawn: str = "", ip: str | None = None) -> None:
        self.reserved.append((token, domain, withdrawn, ip))


class Tracker:
    def __init__(self) -> None:
        self.started: dict[str, Lease] = {}

    def start(self, lease: Lease) -> Request:
        self.started[lease.member] = lease
        return Request(lease.task.url, meta={"task": lease.task, "task_member": lease.member})

    def forget(self, member: str | None) -> Lease | None:
        return self.started.pop(member, None) if member else None


class Catalog:
    """The crawls' states as the worker read them: ``paused`` names the paused ones."""

    def __init__(self) -> None:
        self.paused: set[str] = set()

    def get(self, crawlid: str) -> Any:
        return SimpleNamespace(paused=crawlid in self.paused, partition=None)


class Worker:
    """What the scheduler serves (spiders.worker.build.Worker): a feed, a tracker, the settings; nothing to start."""

    def __init__(self) -> None:
        self.feed, self.tracker, self.catalog = Feed(), Tracker(), Catalog()
        self.settings = SimpleNamespace(pace_horizon=1.0, partition="domain")
        self.info = SimpleNamespace(job="j", spider_type="list", ip="10.0.0.1")
        self.traveller = self.starts = None  # a rule spider's worker
        self.robots = None  # robots.txt not obeyed (spiders.worker.robots has tests of its own)

    def start(self, crawler: Any) -> None:
        pass


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def scheduler(clock: ManualClock) -> FleetScheduler:
    crawler = get_crawler(Spider)
    crawler.engine = SimpleNamespace(_slot=None)  # nudging the engine is a no-op here: the test calls next_request
    scheduler = FleetScheduler(crawler, clock=clock)
    scheduler.start(Worker())  # type: ignore[arg-type]
    return scheduler


def feed_of(scheduler: FleetScheduler) -> Feed:
    assert scheduler.worker is not None
    return scheduler.worker.feed  # type: ignore[return-value]


def test_a_request_leaves_in_its_slot_and_waits_for_an_early_one(scheduler: FleetScheduler, clock: ManualClock) -> None:
    feed = feed_of(scheduler)
    feed.lease("/later", T0 + 30)
    feed.lease("/due", T0 - 0.01, slack=0.2)
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/due") and "fleet_slot" not in request.meta
    assert scheduler.next_request() is None  # /later waits for its slot, held, not sent and not re-reserved
    assert len(scheduler) == 1 and feed.reserved == []
    assert scheduler.crawler.stats.get_value("fleet/pace/sent") == 1
    clock.set(T0 + 30)
    later = scheduler.next_request()
    assert later is not None and later.url.endswith("/later") and feed.reserved == []


def test_a_late_request_withdraws_its_hit_and_waits_for_a_new_slot(scheduler: FleetScheduler) -> None:
    feed = feed_of(scheduler)
    feed.lease("/late", T0 - 5, slack=0.2)  # the downloader could not take it in time
    assert scheduler.next_request() is None
    [(token, domain, withdrawn, _)] = feed.reserved
    assert domain == DOMAIN and withdrawn == "hit-/late"
    assert scheduler.crawler.stats.get_value("fleet/pace/late") == 1
    scheduler._reserved(token, SendSlot(DOMAIN, T0 - 0.01, 0.2, "hit-new"))
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/late")


def test_a_request_is_handed_out_within_its_slack_less_its_way_to_the_site() -> None:
    """The windows count a hit as reaching the site within its slot's slack; the scheduler hands a request out only
    while its way out (0.1 s, at most half the slack) still fits in it (issue 37, item 7)."""
    slot = SendSlot(DOMAIN, T0, 0.1, "hit")
    assert [admission(slot, T0 + dt) for dt in (-0.01, 0.0, 0.05, 0.051)] == [EARLY, ON_TIME, ON_TIME, LATE]
    wide = SendSlot(DOMAIN, T0, 0.6, "hit")  # a 60-s window's slack: all but 0.1 s of it to be handed out
    assert [admission(wide, T0 + dt) for dt in (0.5, 0.501)] == [ON_TIME, LATE]


def test_a_follow_up_reserves_a_hit_of_its_own(scheduler: FleetScheduler) -> None:
    feed, gate = feed_of(scheduler), scheduler.gate
    assert gate is not None
    feed.lease("/first", T0 - 0.01, slack=0.2)
    sent = scheduler.next_request()
    assert sent is not None
    redirect = sent.replace(url=f"http://{DOMAIN}/moved")  # the redirect middleware copies the meta: slot spent
    gate.hold(redirect)
    assert scheduler.next_request() is None
    [(token, domain, withdrawn, _)] = feed.reserved
    assert (domain, withdrawn) == (DOMAIN, "")
    # a slot beyond the horizon was not recorded: the request asks again within a second, without a slot
    scheduler._reserved(token, SendSlot(DOMAIN, T0 + 60, 0.2, ""))
    not_before, _, held = gate.followups[0]
    assert held is redirect and "fleet_slot" not in held.meta
    assert not_before == T0 + REASK_SECONDS


def test_a_leased_task_stays_in_the_prefetch_until_its_request_goes_out(scheduler: FleetScheduler) -> None:
    """A task waiting in the scheduler for its slot is still prefetched: the feed takes no more tasks in its place
    (else a paced site's slots, a whole horizon ahead, would let a worker hold leases beyond its prefetch)."""
    feed, gate = feed_of(scheduler), scheduler.gate
    assert gate is not None
    later = feed.lease("/later", T0 + 30)
    late = feed.lease("/late", T0 - 5, slack=0.2)
    due = feed.lease("/due", T0 - 0.01, slack=0.2)
    assert scheduler.next_request().url.endswith("/due")  # type: ignore[union-attr]
    assert feed.unsent == {later.member, late.member}  # one waits for its slot, one for a new slot
    [(token, _, _, _)] = feed.reserved
    scheduler._reserved(token, SendSlot(DOMAIN, T0 - 0.01, 0.2, "hit-new"))
    assert scheduler.next_request().url.endswith("/late")  # type: ignore[union-attr]
    assert feed.unsent == {later.member}
    redirect = Request(f"http://{DOMAIN}/moved", meta={"task_member": due.member,
                                                      "fleet_slot": SendSlot(DOMAIN, T0 - 0.01, 0.2, "hit-r")})
    gate.hold(redirect)  # a follow-up of a task already sent: no change to the prefetch
    assert scheduler.next_request() is redirect and feed.unsent == {later.member}


def test_late_requests_reserve_only_as_many_slots_as_the_downloader_has_room_for(scheduler: FleetScheduler) -> None:
    """A whole prefetch of late leases is not re-reserved at once: a slot reserved for a request the downloader cannot
    take yet would be missed again (one more reservation, one more hit withdrawn). The others wait, parked, and ask
    for their slot as places free up."""
    feed, gate = feed_of(scheduler), scheduler.gate
    assert gate is not None
    downloader = SimpleNamespace(total_concurrency=3, active={"busy"})  # two free places
    scheduler.crawler.engine = SimpleNamespace(_slot=None, downloader=downloader)
    for n in range(5):
        feed.lease(f"/late{n}", T0 - 5, slack=0.2)
    assert scheduler.next_request() is None
    assert [withdrawn for _, _, withdrawn, _ in feed.reserved] == ["hit-/late0", "hit-/late1"]
    assert len(scheduler) == 5 and len(feed.unsent) == 5  # parked requests stay in the prefetch
    assert scheduler.next_request() is None and len(feed.reserved) == 2  # no room: nothing more asked
    token = feed.reserved[0][0]
    scheduler._reserved(token, SendSlot(DOMAIN, T0 - 0.01, 0.2, "hit-new"))
    downloader.active = {"other"}  # "busy" is done: two free places, one reservation under way
    request = scheduler.next_request()
    assert request is not None and request.url.endswith("/late0")
    assert [withdrawn for _, _, withdrawn, _ in feed.reserved][2:] == ["hit-/late2"]
    downloader.active = set()  # three free places, two reservations under way: one more
    assert scheduler.next_request() is None
    assert [withdrawn for _, _, withdrawn, _ in feed.reserved][3:] == ["hit-/late3"]
    assert len(scheduler) == 4 and feed.unsent == {gate.parked[0][0].meta["task_member"]} | {
        request.meta["task_member"] for request in gate.reserving.values()}


def test_no_request_of_a_blocked_domain_leaves_until_the_block_ends(scheduler: FleetScheduler,
                                                                    clock: ManualClock) -> None:
    """A 429/503 seen by any worker holds the domain's requests whatever their slot; at the block's end their slot
    is late, so each reserves a new one (no earlier than the end)."""
    feed = feed_of(scheduler)
    feed.lease("/due", T0 + 1, slack=0.2)
    scheduler._domain_blocked(DOMAIN, T0 + 30)  # as the block listener's call reaches the reactor
    clock.set(T0 + 1)
    assert scheduler.next_request() is None and feed.reserved == []  # held until the block ends
    clock.set(T0 + 30)
    assert scheduler.next_request() is None
    [(_, domain, withdrawn, _)] = feed.reserved
    assert (domain, withdrawn) == (DOMAIN, "hit-/due")


def test_a_paused_crawls_requests_go_back_to_the_feed_unsent_and_the_others_go_on(scheduler: FleetScheduler,
                                                                                 clock: ManualClock) -> None:
    """The pause reaches the reactor: what the gate holds of the crawl (waiting for its slot, for a new one) is
    handed back with the hit it held; a lease popped afterwards and a follow-up of a response that came back after
    the pause are handed back too, unfetched; another crawl's requests on the same site leave as before."""
    feed, gate, worker = feed_of(scheduler), scheduler.gate, scheduler.worker
    assert gate is not None and worker is not None
    feed.lease_of("/sent", T0 - 0.01, crawlid="p")
    sent = scheduler.next_request()
    assert sent is not None  # in the downloader when the pause comes: it finishes normally
    feed.lease_of("/waits", T0 + 30, crawlid="p")
    feed.lease_of("/other", T0 + 30, crawlid="o")
    assert scheduler.next_request() is None and len(gate.followups) == 2  # both held for their slots
    worker.catalog.paused.add("p")  # type: ignore[attr-defined]  # the feed read the new state
    scheduler._hold_back({"p"})
    assert feed.handed_back == [(f"http://{DOMAIN}/waits", "hit-/waits", None)] and len(gate.followups) == 1
    feed.lease_of("/popped", T0 - 0.01, crawlid="p")  # taken by the feed before it heard of the pause
    assert scheduler.next_request() is None
    assert feed.handed_back[-1] == (f"http://{DOMAIN}/popped", "hit-/popped", None)
    retry = sent.replace(url=f"http://{DOMAIN}/sent?retry")  # a retry of the page that was in the downloader
    assert scheduler.enqueue_request(retry) and feed.handed_back[-1][0] == f"http://{DOMAIN}/sent"
    assert feed.unsent == {gate.followups[0][2].meta["task_member"]}  # only the other crawl's waits, unsent
    clock.set(T0 + 30)
    other = scheduler.next_request()
    assert other is not None and other.url.endswith("/other")


def test_a_batch_of_download_samples_reaches_the_feed_for_adaptive_sites_only(scheduler: FleetScheduler) -> None:
    from frontier.adaptive import Sample

    feed = feed_of(scheduler)
    samples: list[Sample] = []
    feed.sample = samples.append  # type: ignore[attr-defined]
    adaptive = SimpleNamespace(rate_for=lambda domain: SimpleNamespace(adaptive=domain == DOMAIN))
    feed.politeness = SimpleNamespace(rates=adaptive)  # type: ignore[attr-defined]
    scheduler._download_samples([(DOMAIN, 0.4, 200, False), ("other.test", 0.1, 200, False),
                                 (DOMAIN, 2.0, 503, True)])
    assert samples == [Sample(DOMAIN, 0.4, 200, False), Sample(DOMAIN, 2.0, 503, True)]


@pytest.mark.parametrize(("partition", "key"), [("host", "b.example.com"), ("domain", "example.com"),
                                                 ("ip", "10.9.8.7")])
def test_a_redirect_to_another_host_reserves_its_hit_in_that_hosts_queue_of_the_partition(
        scheduler: FleetScheduler, partition: str, key: str) -> None:
    """Issue 37, item 2: a request's hits count on its lease's queue key; a follow-up to another host counts on that
    host's key in its crawl's partition: the host, its domain, or its address — resolved by the reactor's resolver,
    never waited for on the reactor."""
    feed, gate = feed_of(scheduler), scheduler.gate
    assert gate is not None
    resolved: list[str] = []

    def resolve(host: str) -> Any:
        from twisted.internet import defer

        resolved.append(host)
        return defer.succeed("10.9.8.7")

    gate.resolve = resolve
    feed.lease("/first", T0 - 0.01, slack=0.2)
    sent = scheduler.next_request()
    assert sent is not None and (sent.meta["fleet_key"], sent.meta["fleet_key_host"]) == (DOMAIN, DOMAIN)
    assert request_key(sent) == DOMAIN and sent.meta["fleet_partition"] == "domain"  # the fleet's default
    redirect = sent.replace(url="http://b.example.com/moved", meta={**sent.meta, "fleet_partition": partition})
    gate.hold(redirect)
    assert scheduler.next_request() is None
    [(_, domain, withdrawn, _)] = feed.reserved
    assert (domain, withdrawn) == (key, "") and redirect.meta["fleet_key"] == key
    assert resolved == (["b.example.com"] if partition == "ip" else [])

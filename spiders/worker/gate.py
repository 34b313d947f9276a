"""The send-at-slot gate of the worker's scheduler: every request leaves at its slot, and none while its domain is
blocked (reactor thread only; no Redis here: slots are reserved by the feed thread).

- A leased task's request carries the **slot** its politeness step recorded the hit at (``meta["fleet_slot"]``, a
  :class:`frontier.client.SendSlot` on this process's clock): it is handed to the downloader no earlier than the
  slot and no later than its slack after it less the request's way out (:data:`frontier.politeness.WAY_OUT`, at
  most half the slack: :func:`admission`); too early, it is held until then. The windows count every hit as
  reaching the site within the whole slack (``frontier/lua/pace.lua``; the slack has the way out on top of the
  time a request may wait for the downloader, ``frontier.politeness.Politeness.slack_floor``), and the way out is
  the engine, the downloader's middlewares, a connection, the reactor's next write — which waits for whatever
  callback runs (a page parsed) and, on a loaded host, for the CPU (up to 95 ms seen on a 2-core machine running
  three times its cores' load).
- A request that would leave later (the downloader was busy) withdraws its hit and asks the feed for a new slot,
  and so does every follow-up (a redirect or a retry is one more hit on the site), which has no slot of its own. A
  new slot is asked for only while fewer are being asked for than the downloader has free places (the others wait,
  **parked**): a slot reserved for a request the downloader cannot take would be missed again.
- While a domain is **blocked** (a 429/503's Retry-After seen by any worker: this process's
  :class:`~spiders.middlewares.retry_after.RetryAfterMiddleware`, or :class:`frontier.blocks.BlockListener` for the
  others), none of its requests leaves, whatever slot it holds: the site sees nothing but what was already in flight.

Time is the injected clock (:class:`messaging.clock.Clock`, monotonic in production): the same one the feed turns
slots into and the block listener counts blocks on.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from scrapy import Request

from frontier.client import SendSlot
from frontier.politeness import WAY_OUT
from messaging.clock import Clock
from messaging.domains import DOMAIN, IP, domain_of, host_of, is_ip, partition_key

# Where a request's hits are counted (issue 37, item 2): the queue key of its lease, and the host it was made for.
KEY_META, KEY_HOST_META, PARTITION_META = "fleet_key", "fleet_key_host", "fleet_partition"
REASK_SECONDS = 1.0  # a follow-up whose slot is far ahead asks again this often (a rate raised live applies)
EARLY, ON_TIME, LATE = "early", "on time", "late"


def request_key(request: Request) -> str | None:
    """The queue key a request's hit counts on (its throttles, its blocks): its lease's for the host the lease was
    for (a retry, a redirect on the host), else that of its own host in its crawl's partition — the host, or its
    registered domain; ``None`` in the partition by IP for a host whose address is not known yet (the gate resolves
    it: :meth:`SendGate.admit`)."""
    meta = request.meta
    host = host_of(request.url)
    key = meta.get(KEY_META)
    if key is not None and meta.get(KEY_HOST_META) == host:
        return str(key)
    mode = meta.get(PARTITION_META, DOMAIN)
    if mode == IP and not is_ip(host):
        return None
    return partition_key(request.url, mode)


def site_of(request: Request) -> str:
    """:func:`request_key`, or the registered domain when the key waits for an address (metrics, proxies)."""
    key = request_key(request)
    return key if key is not None else domain_of(request.url)


def admission(slot: SendSlot, now: float) -> str:
    """Whether a request with ``slot`` may be handed to the downloader at ``now``: :data:`EARLY` (wait for the
    slot), :data:`ON_TIME`, or :data:`LATE` (so late that its way out might end past its slack: it reserves
    again)."""
    if now < slot.send_at:
        return EARLY
    return LATE if now > slot.send_at + slot.slack - min(WAY_OUT, slot.slack / 2) else ON_TIME


class SlotSource(Protocol):
    """What the gate asks of the feed (:class:`spiders.worker.feed.TaskFeed`)."""

    def reserve(self, token: Any, domain: str, withdrawn: str = "", ip: str | None = None) -> None: ...

    def sent(self, member: str | None) -> None: ...


class SendGate:
    """Holds requests until their slot; ``room()`` is the downloader's free places, ``wake_in(seconds)`` asks the
    engine to look at the scheduler again then (0: at once)."""

    def __init__(self, feed: SlotSource, clock: Clock, stats: Any, horizon: float, room: Callable[[], int],
                 wake_in: Callable[[float], None], resolve: Callable[[str], Any] | None = None) -> None:
        """``resolve(host)``: a Deferred of the host's address (the reactor's resolver), for the follow-ups of a
        crawl partitioned by IP that go to another host."""
        self.feed = feed
        self.resolve = resolve
        self.clock = clock
        self.stats = stats  # the crawler's stats: fleet/pace/sent, late, reserved
        self.horizon = horizon  # CRAWLFLEET_PACE_HORIZON: a reservation beyond it was not recorded
        self.room = room
        self.wake_in = wake_in
        self.followups: list[tuple[float, int, Request]] = []  # (not_before, order, request)
        self.reserving: dict[int, Request] = {}  # requests waiting for the feed to reserve their slot
        # Requests that need a new slot while the downloader has no room for them: reserved only when it has (a slot
        # reserved now would be missed again while they wait, and cost one more reservation each time).
        self.parked: deque[tuple[Request, str, str]] = deque()
        self.blocked: dict[str, float] = {}  # domain -> until (this clock): a 429/503 seen by any worker
        self._order = itertools.count()
        self._tokens = itertools.count()

    def __len__(self) -> int:
        return len(self.followups) + len(self.reserving) + len(self.parked)

    def hold(self, request: Request, not_before: float = 0.0) -> None:
        """Keep ``request`` until ``not_before`` (and its own ``meta["not_before"]``), then let it ask to go."""
        not_before = max(not_before, float(request.meta.get("not_before") or 0.0))
        heapq.heappush(self.followups, (not_before, next(self._order), request))
        self.wake_in(max(0.0, not_before - self.clock.now()))

    def due(self) -> Request | None:
        """A held request that may go out now, if any (parked ones ask for their slot first, room permitting)."""
        self._unpark()
        while self.followups and self.followups[0][0] <= self.clock.now():
            held = heapq.heappop(self.followups)[2]
            if self.admit(held):
                return held
        return None

    def admit(self, request: Request) -> bool:
        """Whether the request may go out now: within its slot's span. Too early, it waits for the slot; too late,
        or without a slot (a follow-up), it gets a new one from the feed first. While its domain is blocked, it waits
        for the block's end whatever its slot."""
        slot: SendSlot | None = request.meta.get("fleet_slot")
        domain = request_key(request)
        if domain is None:  # a follow-up to another host, partitioned by IP: its address first
            self._resolve(request)
            return False
        request.meta[KEY_META], request.meta[KEY_HOST_META] = domain, host_of(request.url)
        now = self.clock.now()
        blocked_until = self.blocked.get(domain, 0.0)
        if blocked_until > now:  # reserved or leased before the site said 429/503: it waits the block out, then
            self.hold(request, blocked_until)  # its slot is late and a new one is reserved (no earlier than the end)
            return False
        if slot is None or slot.domain != domain:
            self._reserve(request, domain, "")
            return False
        when = admission(slot, now)
        if when == EARLY:
            self.hold(request, slot.send_at)
            return False
        if when == LATE:
            self.stats.inc_value("fleet/pace/late")
            self._reserve(request, domain, slot.hit)
            return False
        del request.meta["fleet_slot"]  # spent: a follow-up copies the meta and needs a slot of its own
        self.stats.inc_value("fleet/pace/sent")
        self.feed.sent(request.meta.get("task_member"))  # a leased task's request leaves the prefetch only now
        return True

    def reserved(self, token: int, slot: SendSlot) -> None:
        """The feed's answer to a reservation (on the reactor)."""
        request = self.reserving.pop(token, None)
        if request is None:
            return
        if not slot.hit:  # due beyond the horizon, not recorded: ask again nearer the time, or within a second,
            # so that a rate raised meanwhile applies (frontier.client.FrontierClient.reserve)
            self.hold(request, min(slot.send_at - self.horizon, self.clock.now() + REASK_SECONDS))
            return
        self.stats.inc_value("fleet/pace/reserved")
        request.meta["fleet_slot"] = slot
        self.hold(request, slot.send_at)

    def block(self, domain: str, until: float) -> None:
        """No request of ``domain`` leaves before ``until`` (this clock); blocks that ended are forgotten."""
        self.blocked[domain] = max(until, self.blocked.get(domain, 0.0))
        now = self.clock.now()
        for name in [name for name, at in self.blocked.items() if at <= now]:
            del self.blocked[name]

    def withdraw(self, wanted: Callable[[Request], bool]) -> list[Request]:
        """Take out every request held here that ``wanted`` says (a paused crawl's): waiting for its slot or a block's
        end, for a new slot, or parked; none of them has gone out. A reservation under way is forgotten (its answer
        finds nothing here)."""
        taken = [entry[2] for entry in self.followups if wanted(entry[2])]
        if taken:
            self.followups = [entry for entry in self.followups if not wanted(entry[2])]
            heapq.heapify(self.followups)
        for token in [token for token, request in self.reserving.items() if wanted(request)]:
            taken.append(self.reserving.pop(token))
        taken += [entry[0] for entry in self.parked if wanted(entry[0])]
        self.parked = deque(entry for entry in self.parked if not wanted(entry[0]))
        return taken

    def _resolve(self, request: Request) -> None:
        """Find the address of the request's host (the reactor's resolver, cached); it is its key, and the request
        asks to go again. A host that does not resolve is keyed by its name (its download fails anyway)."""
        host = host_of(request.url)

        def keyed(address: Any) -> None:
            key = str(address) if isinstance(address, str) and address else host
            request.meta[KEY_META], request.meta[KEY_HOST_META] = key, host
            self.hold(request)

        if self.resolve is None:
            keyed(None)
            return
        self.resolve(host).addCallbacks(keyed, lambda _: keyed(None))

    def _reserve(self, request: Request, domain: str, withdrawn: str) -> None:
        """Ask the feed for a new slot (``withdrawn``: the missed slot's hit, taken back) — at once while fewer
        reservations are under way than the downloader has free places, else when it has (:meth:`_unpark`): a
        request reserves only a slot it can be sent in, and one pass never re-reserves a whole prefetch of late
        leases at once."""
        request.meta.pop("fleet_slot", None)
        if len(self.reserving) >= self.room():
            self.parked.append((request, domain, withdrawn))
            return
        self._send_reservation(request, domain, withdrawn)

    def _unpark(self) -> None:
        room = self.room()
        while self.parked and len(self.reserving) < room:
            self._send_reservation(*self.parked.popleft())

    def _send_reservation(self, request: Request, domain: str, withdrawn: str) -> None:
        token = next(self._tokens)
        self.reserving[token] = request
        self.feed.reserve(token, domain, withdrawn, request.meta.get("fleet_ip"))

"""What the frontier client hands out: leases, reservations, step results and send slots (no Redis here).

A :class:`Lease` is a task moved from ``<job>:{d}:queue`` into ``<job>:{d}:inflight`` with its deadline, and the
slot its hit was recorded at; a :class:`Reservation` is a hit recorded for a request without a lease of its own (a
follow-up, or a request that missed its slot). Both carry Redis time; :meth:`TakeResult.send_slot` and
:meth:`Reservation.send_slot` turn them into a :class:`SendSlot` on this process's clock, which is what the worker's
scheduler sends by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from messaging.tasks import Task

US = 1_000_000  # the scripts' time unit: microseconds


def now_arg(now: float | None) -> str:
    """A script's ``now`` argument: microseconds, or "" for the Redis clock."""
    return "" if now is None else str(round(now * US))


class Outcome:
    """What one politeness step said."""

    TAKEN = "taken"
    EMPTY = "empty"
    THROTTLED = "throttled"
    BLOCKED = "blocked"
    ROBOTS_PENDING = "robots_pending"  # the domain's robots.txt is being fetched, or is unreachable
    DISALLOWED = "disallowed"  # only disallowed URLs were found (removed); try again at once
    BLACKLISTED = "blacklisted"  # the domain's queue was dropped
    CHANGED = "changed"  # the queue's head was no longer the one checked against robots.txt (never handed out)

    WAITING = frozenset({THROTTLED, BLOCKED, ROBOTS_PENDING})


@dataclass(frozen=True)
class SendSlot:
    """When a request may go out, on this process's clock (the caller's, monotonic in the worker)."""

    domain: str
    send_at: float  # no earlier than this...
    slack: float  # ...and no later than this many seconds after it
    hit: str  # its hit in the throttle windows (withdrawn if it misses the slot)
    ip: str | None = None  # the address its per-IP window was taken for (a proxy's), None: this host's


def send_slot(domain: str, not_before: float, redis_now: float, slack: float, hit: str, local_now: float,
              ip: str | None, offset: float | None = None) -> SendSlot:
    """A slot on the Redis clock (``not_before``, in a reply that carried ``redis_now`` and was read at ``local_now``)
    on this process's clock. ``offset``: this clock minus the Redis clock as the fastest recent replies show it
    (:class:`messaging.clock.RedisTimeMap`); the slot is then exactly that far from its Redis time, however late this
    reply was read, and a slot that passed while the reply travelled is in the past (the sender reserves again).
    Without it, the reply's own offset (a slot at least ``local_now``)."""
    if offset is None:
        return SendSlot(domain, local_now + max(0.0, not_before - redis_now), slack, hit, ip)
    return SendSlot(domain, not_before + min(offset, local_now - redis_now), slack, hit, ip)


@dataclass(frozen=True)
class Lease:
    domain: str
    member: str  # the task as stored in the queue and in the leases
    deadline: float  # seconds since the epoch, Redis clock
    not_before: float = 0.0  # the slot of its hit: the request may go out from then (Redis clock)...
    slack: float = 0.0  # ...until this many seconds after it; later, it reserves a new slot (FrontierClient.reserve)
    hit: str = ""  # the hit's member in both throttle windows (withdrawn by a re-reservation)

    @cached_property
    def task(self) -> Task:
        return Task.decode(self.member)


@dataclass(frozen=True)
class Reservation:
    """A hit reserved for a request that goes out without a lease's slot (a follow-up, or one that missed its slot)."""

    domain: str
    now: float  # Redis time of the call
    not_before: float  # the slot (Redis clock): the request may go out from then...
    slack: float  # ...until this many seconds after it
    hit: str  # "": the slot is beyond the horizon and was not recorded; ask again at ``not_before - horizon``

    @property
    def recorded(self) -> bool:
        return bool(self.hit)

    def send_slot(self, local_now: float, ip: str | None = None, offset: float | None = None) -> SendSlot:
        return send_slot(self.domain, self.not_before, self.now, self.slack, self.hit, local_now, ip, offset)


@dataclass
class TakeResult:
    outcome: str
    domain: str
    now: float = 0.0  # Redis time of the step (seconds); 0.0 when no step script ran (robots.txt pending, empty)
    wait: float = 0.0  # seconds until the domain may open (throttled, blocked, robots pending; taken: after the
    # batch of steps that ended on such a refusal, spiders.worker.take), for the ready index (frontier.client.ready)
    lease: Lease | None = None
    removed: list[Task] = field(default_factory=list)  # dropped (disallowed, blacklisted): mark them complete
    drained: bool = False  # taken: the queue held no more tasks after it (the ready index drops the domain)
    waiting: set[str] = field(default_factory=set)  # hosts of the queue passed by: their robots.txt is pending

    @property
    def task(self) -> Task | None:
        return self.lease.task if self.lease else None

    def send_slot(self, local_now: float, ip: str | None = None, offset: float | None = None) -> SendSlot:
        """When the lease's request may go out, on the clock that reads ``local_now`` now (``offset``: see
        :func:`send_slot`)."""
        assert self.lease is not None, "only a step that took has a slot"
        lease = self.lease
        return send_slot(lease.domain, lease.not_before, self.now, lease.slack, lease.hit, local_now, ip, offset)

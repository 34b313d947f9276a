"""The frontier's one client: the face of the queue/lease protocol that workers, the master and the managers share
(in the spirit of Crawlee's ``RequestQueueClient``: fetch, mark handled, reclaim).

The master lands tasks in a job's domain queues (``<job>:{<domain>}:queue``, :mod:`master.staging`); the job's
worker takes them through :class:`FrontierClient`, one politeness step at a time, each a lease; it completes them or
their leases expire and they go back; when the job is gone the master hands its tasks back to ``seeds``. Every
operation below is one or a few atomic Lua calls on one hash slot (``frontier/lua``, declared in
:mod:`frontier.client.lua`, loaded the one way of :mod:`messaging.scripts`), batched per round trip:

- **take**: :meth:`~FrontierClient.take` (one step), :meth:`~FrontierClient.take_many` (up to N steps of one domain),
  :meth:`~FrontierClient.take_domains` (the steps of a group of due domains): ``take.lua`` with ``pace.lua``, after
  one read of the queues' heads when robots.txt is obeyed (:mod:`frontier.client.take`);
- **send slot**: :meth:`TakeResult.send_slot`, :meth:`Reservation.send_slot`: when the request may go out, on this
  process's clock (no call);
- **reserve** a hit for a request without a lease of its own: :meth:`~FrontierClient.reserve`,
  :meth:`~FrontierClient.reserve_many`: ``reserve.lua`` with ``pace.lua``;
- **complete** (mark handled): :meth:`~FrontierClient.complete`, :meth:`~FrontierClient.ack`: ``complete.lua``,
  ``ack.lua``; **renew**: :meth:`~FrontierClient.renew`: ``renew.lua`` (:mod:`frontier.client.leases`);
- **requeue** expired leases (reclaim): :meth:`~FrontierClient.requeue_expired`,
  :meth:`~FrontierClient.requeue_expired_many`: ``requeue.lua``; a retired job's tasks back to ``seeds``:
  :meth:`~FrontierClient.collect_retired`, :meth:`~FrontierClient.release_retired` (``retired_collect.lua``,
  ``retired_release.lua``; the master's ``retired_reseed.lua`` runs between them, :mod:`master.requeue`);
- **ready index and count**: :attr:`FrontierClient.ready` (:class:`ReadyIndex`), :meth:`~FrontierClient.ready_count`,
  :func:`add_to_index`, and for the dispatcher :func:`~frontier.client.ready.waiting_for_pace`: ``ready_walk.lua``,
  ``ready_add.lua``, ``ready_due.lua`` (:mod:`frontier.client.ready`);
- **robots.txt claim / store**: :attr:`FrontierClient.robots` (:class:`RobotsRecords`): ``robots_claim.lua``,
  ``robots_store.lua``, ``robots_down.lua``, ``robots_renew.lua``, under :class:`frontier.robots_cache.RobotsCache`;
- **block** a domain, **drop** a blacklisted queue: :meth:`~FrontierClient.block`, :func:`block_domain`,
  :meth:`~FrontierClient.drop_queue`: ``block.lua``, ``drop.lua``;
- **park** the tasks of paused crawls (``messaging.pause``) and put them back: :meth:`~FrontierClient.park` (leases
  handed back, their hits withdrawn), :meth:`~FrontierClient.park_queued`, :meth:`~FrontierClient.unpark`:
  ``park.lua``, ``park_queued.lua``, ``unpark.lua`` (:mod:`frontier.client.parking`).

The rules the steps apply — rates, pacing, robots.txt verdicts, the blacklist — are
:class:`frontier.politeness.Politeness`'s; what a step hands out is in :mod:`frontier.client.types`. Those who only
watch (the manager's Sites page, the dispatcher's recount, tools) read through :class:`FrontierReader`. Every key
comes from :mod:`messaging.keys`; no other module formats a job's queue or lease keys, except the master's landing
(:mod:`master.staging`), which fills them.
"""

from frontier.client.client import FrontierClient, block_domain
from frontier.client.parking import HandedBack, Parking
from frontier.client.reader import FrontierReader, SiteState
from frontier.client.ready import Due, ReadyIndex, add_to_index
from frontier.client.robots import RobotsRecords
from frontier.client.types import Lease, Outcome, Reservation, SendSlot, TakeResult

__all__ = ["Due", "FrontierClient", "FrontierReader", "HandedBack", "Lease", "Outcome", "Parking", "ReadyIndex",
           "Reservation", "RobotsRecords", "SendSlot", "SiteState", "TakeResult", "add_to_index", "block_domain"]

"""The poller: hands pending jobs to free process slots (scrapyd's QueuePoller).

Each free slot of the launcher waits on :meth:`QueuePoller.next` (a ``DeferredQueue.get``); :meth:`poll`, run
every CRAWLFLEET_MANAGER_POLL_INTERVAL seconds and right after a job is scheduled, pops one pending job per waiting
slot. A job stays in SQLite until a slot takes it, so ``max_proc`` bounds the processes and a restart keeps the rest.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, DeferredQueue
from zope.interface import implementer

from manager.interfaces import IPoller
from manager.jobs import Job
from manager.queue import SqlitePendingQueue


@implementer(IPoller)
class QueuePoller:
    def __init__(self, queue: SqlitePendingQueue) -> None:
        self.queue = queue
        self.dq: DeferredQueue[Job] = DeferredQueue()

    def poll(self) -> None:
        while self.dq.waiting and self.queue.count():
            job = self.queue.pop()
            if job is not None:
                self.dq.put(job)  # fires the oldest waiting slot

    def next(self) -> Deferred[Job]:
        return self.dq.get()

    @property
    def free_slots(self) -> int:
        return len(self.dq.waiting)

"""The manager's parts, as scrapyd cuts them (seed 4.3.2): each interface has one module that implements it.

- :class:`IPendingQueue` (:mod:`manager.queue`): jobs waiting for a process slot, in SQLite, kept across restarts;
- :class:`IPoller` (:mod:`manager.poller`): hands pending jobs to free slots through a ``DeferredQueue``;
- :class:`ILauncher` (:mod:`manager.launcher`): runs at most ``max_proc`` spider processes, stops them on cancel;
- :class:`IJobHistory` (:mod:`manager.history`): finished jobs, bounded, kept across restarts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zope.interface import Attribute, Interface

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from manager.jobs import Job, JobRecord


class IPendingQueue(Interface):
    def add(job: Job) -> None:
        """Queue a job; its priority orders the queue, FIFO within one priority."""

    def pop() -> Job | None:
        """The next job, removed from the queue, or None."""

    def remove(job_id: str) -> bool:
        """Remove a pending job; True when it was there."""

    def list() -> list[Job]:
        """The pending jobs, next first."""

    def count() -> int:
        """How many jobs wait."""


class IPoller(Interface):
    def poll() -> None:
        """Move pending jobs to slots that wait for one."""

    def next() -> Deferred[Job]:
        """A Deferred that fires with the next job for a free slot."""


class ILauncher(Interface):
    processes = Attribute("slot -> running process")

    def cancel(job_id: str) -> bool:
        """Stop a running job: SIGTERM, then SIGKILL after the kill timeout."""


class IJobHistory(Interface):
    def add(record: JobRecord) -> None:
        """Keep a finished job (the oldest ones beyond the bound are forgotten)."""

    def list() -> list[JobRecord]:
        """Finished jobs, latest first."""

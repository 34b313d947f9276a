"""One's own spider's start requests enter the frontier once per crawl, not once per worker (issue 35).

Every worker of a crawl runs the same spider, and Scrapy iterates every spider's ``start()`` (``start_requests()``
for older spiders, which Scrapy's own ``start()`` calls); a crawl needs its start requests once. So the output
middleware hands ``start()`` to :meth:`StartOnce.run` (``TaskOutputMiddleware.process_start``), which first asks for
the crawl's **start claim** (``start:{seeds}:<crawlid>``, ``lua/start_claim.lua``):

- ``done``: another worker pushed them all; this one iterates nothing (its spider's ``start()`` is never called);
- ``wait``: another worker holds the claim: this one asks again every few seconds; if the holder dies its claim
  expires (CLAIM_SECONDS, renewed at every batch it pushes) and the next worker to ask takes over and runs
  ``start()`` again — what the dead one pushed is deduplicated by the crawl's Bloom filter (and ``seeds``' members);
- ``mine``: this worker iterates ``start()``; each request becomes a task (:class:`spiders.worker.own.Traveller`; one
  that cannot travel is refused, logged and counted), and batches of them go through the crawl's filter and limits
  into ``seeds`` (:meth:`spiders.worker.commit.Committer.push_new`) off the reactor, through the children journal
  under the batch's number (``start <n>``): a push that Redis cut off is tried again (a few times, backing off), and
  one cut off by the worker's death is finished by the worker that takes the claim over, whose batch of the same
  number pushes what the dead one marked and did not push. Items ``start()`` yields go to the pipelines as Scrapy
  sends them. When ``start()`` is exhausted (or raised, which Scrapy logs) the claim is
  marked ``done`` (``lua/start_done.lua``).

The first claim puts one pending count on the crawl, which ``done`` takes away, so the finisher cannot declare the
crawl finished while its start requests are still coming (nor before they came at all). A worker stopped while it
iterates leaves the claim to expire: another worker finishes the job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task, threads

from frontier.lua import PENDING_LUA
from messaging import keys
from messaging.clients import as_text
from messaging.scripts import lua_script
from messaging.tasks import Task
from spiders.travel import CannotTravel
from spiders.worker.commit import Committer
from spiders.worker.own import Traveller

logger = logging.getLogger(__name__)
LUA = Path(__file__).with_name("lua")
CLAIM = lua_script(LUA / "start_claim.lua")
DONE = lua_script(LUA / "start_done.lua", PENDING_LUA)
CLAIM_SECONDS = 60.0  # a holder that stops renewing (dead) loses the claim after this
ASK_AGAIN_SECONDS = 2.0  # how often a worker waiting for another's start asks again
BATCH = 500  # start requests per push
PUSH_ATTEMPTS = 5  # a batch whose push Redis cut off is pushed again, backing off 1, 2, 4, 8 s, before start() fails


class StartClaim:
    """The crawl's start claim, for one job (blocking calls: run them off the reactor)."""

    def __init__(self, redis: Any, crawlid: str, job: str, seconds: float = CLAIM_SECONDS) -> None:
        self.redis = redis
        self.crawlid = crawlid
        self.job = job
        self.micros = int(seconds * 1_000_000)
        self._claim = CLAIM.on(redis)
        self._done = DONE.on(redis)

    def take(self) -> tuple[str, str]:
        """``("done", "")``, ``("mine", "")`` (taken or renewed) or ``("wait", holder)``."""
        reply = self._claim(keys=[keys.crawl_start(self.crawlid), keys.PENDING_SEEDS],
                            args=[self.crawlid, self.job, self.micros])
        state = as_text(reply[0])
        return state, as_text(reply[1]) if len(reply) > 1 else ""

    def done(self) -> bool:
        return bool(int(self._done(keys=[keys.crawl_start(self.crawlid), keys.PENDING_SEEDS, keys.FINISH_CANDIDATES],
                                   args=[self.crawlid, self.job])))


class StartOnce:
    """Runs a crawl's ``start()`` on the one worker that holds its start claim (see the module docstring)."""

    def __init__(self, claim: StartClaim, traveller: Traveller, committer: Committer) -> None:
        self.claim = claim
        self.traveller = traveller
        self.committer = committer
        self.pushed = 0
        self.batches = 0  # pushed by this worker: the next batch's journal name
        self.stopping = False

    async def run(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """What ``start()`` yields that is not a request (items), once this worker holds the claim."""
        if not await self._claimed():
            return
        logger.info("this worker turns the start requests of crawl %s into tasks", self.claim.crawlid)
        renew = task.LoopingCall(lambda: threads.deferToThread(self.claim.take).addErrback(_renew_failed))
        renew.start(CLAIM_SECONDS / 3, now=False)
        batch: list[Task] = []
        refused: list[tuple[str, str]] = []
        error: Exception | None = None
        try:
            async for element in start:
                if not isinstance(element, Request):
                    yield element
                    continue
                try:
                    batch.append(self.traveller.task(element))
                except CannotTravel as problem:
                    refused.append(self.traveller.refuse(element, problem, "by start()"))
                if len(batch) + len(refused) >= BATCH:
                    await self._push(batch, refused)
                    batch, refused = [], []
        except Exception as exc:  # Scrapy logs it (as it logs any error of start()); what came before counts
            error = exc
        finally:
            renew.stop()
        if not self.stopping:
            await self._push(batch, refused)
            await _in_thread(self.claim.done)
            logger.info("crawl %s: %d start requests pushed%s", self.claim.crawlid, self.pushed,
                        " (start() ended with an error)" if error is not None else "")
        if error is not None:
            raise error

    async def _claimed(self) -> bool:
        while not self.stopping:
            state, holder = await _in_thread(self.claim.take)
            if state == "done":
                logger.info("the start requests of crawl %s are in already", self.claim.crawlid)
                return False
            if state == "mine":
                return True
            logger.debug("crawl %s: %s turns its start requests into tasks; asking again", self.claim.crawlid, holder)
            from twisted.internet import reactor  # installed by Scrapy by now (never at import: the asyncio one)

            await maybe_deferred_to_future(task.deferLater(reactor, ASK_AGAIN_SECONDS, lambda: None))
        return False

    async def _push(self, batch: list[Task], refused: list[tuple[str, str]]) -> None:
        name = f"start {self.batches}"

        def push() -> int:
            for attempt in range(PUSH_ATTEMPTS):
                try:
                    self.claim.take()  # renewed: still this worker's while it pushes
                    if refused:
                        self.committer.count_refused(self.claim.crawlid, refused)
                    return self.committer.push_new(name, batch)
                except Exception as exc:  # Redis cut the push off: the journal makes pushing again safe
                    if attempt + 1 == PUSH_ATTEMPTS or self.stopping:
                        raise
                    logger.warning("crawl %s: pushing start requests failed (%s); again in %d s",
                                   self.claim.crawlid, exc, 2 ** attempt)
                    time.sleep(2 ** attempt)  # a thread of the pool, never the reactor
            return 0

        self.pushed += await _in_thread(push)
        self.batches += 1


def _renew_failed(failure: Any) -> None:
    logger.warning("could not renew the start claim: %s", failure.getErrorMessage())


async def _in_thread(function: Any) -> Any:
    return await maybe_deferred_to_future(threads.deferToThread(function))

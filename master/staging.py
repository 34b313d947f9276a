"""Moving tasks from ``seeds`` into worker queues without losing or duplicating one, even across a crash.

``seeds`` and a worker's ``<job>:{<domain>}:queue`` live in different hash slots (on a Redis Cluster, on different
nodes), so no single call can move a task between them. A batch therefore moves in steps, each atomic in one slot:

1. **stage** (``seeds`` slot): check the leader's epoch (``master:{seeds}:epoch``, fencing), remove the picked
   tasks from ``seeds`` and record them, with their seeds score and destination, under the batch id in the epoch's
   staging hash ``master:{seeds}:staging:<epoch>``. A staged task still counts as pending in ``seeds``' slot.
2. **land** (one call per domain slot): claim the batch's *landing marker* of the domain
   (``master:{<domain>}:landed:<batch>``, ``SET NX``) and, only if the claim succeeds, add the tasks to their
   queues and count them in the domain's per-crawl pending counts. Once the land calls have returned, the domains
   that received tasks enter their jobs' ready indexes (``frontier.client.ready``: after the queue, never before).
3. **settle** (``seeds`` slot, guarded by deleting the batch from the staging hash, so it happens once): tasks of
   domains that landed leave ``seeds``' pending counts (and count in the spider type's dispatched-per-minute
   window); tasks of domains whose marker was *revoked* go back into ``seeds`` at their old score.

Recovery: a new leader first takes a higher epoch (so an old leader can no longer stage), then, for each batch left
in an older epoch's staging hash, *revokes* every domain marker that is not claimed yet (``SET NX revoked``) and
settles the batch by what each marker says. The marker is the single decision per (batch, domain): a paused old
leader that wakes up finds its markers revoked and cannot land, and whoever settles first settles it the same way.
Every task is thus in exactly one of ``seeds`` and its destination queue once a batch is settled, and in at least one
of them (or the staging hash) at every instant — so a crawl's pending counts never reach zero while it has a task.

**Dead letters.** A task that cannot be placed (not JSON, no URL, a host that breaks the host rule of
``messaging.domains``, so that no key can be formed for it) must neither crash the leader nor block ``seeds``: the
dispatcher hands it to :meth:`Staging.dead_letter`, which in one fenced call in ``seeds``' slot removes it from
``seeds`` and its crawl's pending count (the crawl can still finish), counts it per crawl
(``master:{seeds}:dead-letter-counts``, shown by the info answer), keeps its record in a capped list
(``master:{seeds}:dead-letters``) and in an outbox that the leader produces to ``crawlfleet.failed``
(:func:`send_dead_letters`, at least once). A batch staged by an older leader with such a domain is settled by
putting those tasks back into ``seeds``, from where the next round dead-letters them.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frontier import finish_hints
from frontier.client import add_to_index
from frontier.lua import PENDING_LUA
from master.lua import LUA
from messaging import keys
from messaging.bounded import count_evictions, declare_memo
from messaging.clients import RedisClient, as_text
from messaging.domains import host_problem
from messaging.scripts import is_cluster, lua_script, run_scripts

MARKER_TTL = 86400
DEAD_LETTER_CAP = 10_000  # records kept in the dead-letter list (and at most waiting in its outbox)
MARKERS_PER_DEL = 1000  # landing markers deleted by one DEL on a single server
KNOWN_LIMIT = 200_000  # a landing marker outlives any recovery; it is also deleted once its batch is settled

STAGE = lua_script(LUA / "stage.lua")
LAND = lua_script(LUA / "land.lua")
REVOKE = lua_script(LUA / "revoke.lua")

SETTLE = lua_script(LUA / "settle.lua", PENDING_LUA)
DEAD_LETTER = lua_script(LUA / "dead_letter.lua", PENDING_LUA)


class LeadershipLost(RuntimeError):
    """A newer dispatcher epoch exists: this process is no longer the leader and must stop dispatching."""


@dataclass(frozen=True)
class Pick:
    """One task chosen for one worker."""

    member: str  # the task as stored in seeds
    job: str
    domain: str
    crawlid: str
    spider_type: str
    queue_score: float


@dataclass(frozen=True)
class DeadLetter:
    """A task in ``seeds`` that cannot be placed, and the record that says why (``messaging.answers``)."""

    member: str
    crawlid: str
    record: dict[str, Any]


@dataclass(frozen=True)
class Staged:
    member: str
    score: str  # its score in seeds, exactly as Redis gave it
    job: str
    domain: str


class Staging:
    """Stage, land and settle batches for the leader of ``epoch``; recover the batches of older epochs."""

    def __init__(self, redis: RedisClient, epoch: int) -> None:
        self.redis = redis
        self.epoch = int(epoch)
        self._batches = itertools.count(1)
        # (set key, domain) pairs already added: a job's or a crawl's domain set only grows while it is alive
        self._known: set[tuple[str, str]] = set()
        declare_memo("landing_markers")
        self._stage = STAGE.on(redis)
        self._land = LAND.on(redis)
        self._revoke = REVOKE.on(redis)
        self._settle = SETTLE.on(redis)
        self._dead_letter = DEAD_LETTER.on(redis)

    # --- the normal path ------------------------------------------------------------------------------------------
    def stage(self, picks: list[Pick]) -> tuple[str, list[Pick]]:
        """Step 1; returns the batch id and the picks that were still in ``seeds``. Raises LeadershipLost."""
        from redis.exceptions import ResponseError

        batch = f"{self.epoch}:{next(self._batches)}"
        args: list[Any] = [self.epoch, batch]
        for pick in picks:
            args += [pick.member, pick.job, pick.domain]
        try:
            taken = self._stage(keys=[keys.SEEDS, keys.MASTER_EPOCH, keys.master_staging(self.epoch),
                                      keys.MASTER_STAGING_EPOCHS], args=args)
        except ResponseError as exc:
            if "FENCED" in str(exc):
                raise LeadershipLost(f"epoch {self.epoch} is no longer current") from exc
            raise
        return batch, [picks[int(i)] for i in taken]

    def land(self, batch: str, picks: list[Pick]) -> dict[str, bool]:
        """Step 2 for every domain of the batch; returns domain -> landed (False: revoked by a newer leader)."""
        by_domain: dict[str, list[Pick]] = defaultdict(list)
        members: dict[str, set[str]] = defaultdict(set)
        # A domain without keys (it breaks the host rule) cannot land: the settle step puts its tasks back into
        # seeds, where the dispatcher dead-letters them; nor may it enter a domain set (the requeue reads those).
        unkeyable = {pick.domain for pick in picks if host_problem(pick.domain) is not None}
        for pick in picks:
            if pick.domain in unkeyable:
                continue
            by_domain[pick.domain].append(pick)
            for key in (keys.job_domains(pick.job), keys.crawl_domains(pick.crawlid)):
                if (key, pick.domain) not in self._known:
                    members[key].add(pick.domain)
        if members:
            # before the queue exists: the requeue of a dead job and the finisher find it through these sets
            pipe = self.redis.pipeline(transaction=False)
            for key, domains in members.items():
                pipe.sadd(key, *domains)
            pipe.execute()
            if len(self._known) > KNOWN_LIMIT:
                count_evictions("landing_markers", len(self._known))
                self._known.clear()
            self._known.update((key, domain) for key, domains in members.items() for domain in domains)
        calls = []
        owners: list[list[tuple[str, str]]] = []  # per call: (job, spider type) of each queue
        for domain, group in by_domain.items():
            queues: list[str] = []
            owner: list[tuple[str, str]] = []
            args: list[Any] = [MARKER_TTL]
            for pick in group:
                queue = keys.queue(pick.job, domain)
                if queue not in queues:
                    queues.append(queue)
                    owner.append((pick.job, pick.spider_type))
                args += [queues.index(queue) + 1, repr(pick.queue_score), pick.member, pick.crawlid]
            calls.append((self._land, [keys.dispatch_landed(domain, batch), keys.pending_domain(domain), *queues],
                          args))
            owners.append(owner)
        results = run_scripts(self.redis, calls)
        landed = {domain: not isinstance(result, int) for domain, result in zip(by_domain, results, strict=True)}
        self._index(by_domain, owners, results)
        return {**landed, **dict.fromkeys(unkeyable, False)}

    def _index(self, by_domain: dict[str, list[Pick]], owners: list[list[tuple[str, str]]],
               results: list[Any]) -> None:
        """After the land calls returned (never before: frontier.client.ready's invariant), the domains that received
        tasks enter their jobs' ready indexes and the ready gauges count the tasks."""
        counts: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        for domain, owner, result in zip(by_domain, owners, results, strict=True):
            if isinstance(result, int):
                continue  # revoked
            for (job, spider_type), added in zip(owner, result[1:], strict=False):
                if int(added):
                    counts[(job, spider_type)][domain] = int(added)
        if not counts:
            return
        pipe = None if is_cluster(self.redis) else self.redis.pipeline(transaction=False)
        for (job, spider_type), per_domain in counts.items():
            add_to_index(self.redis, job, spider_type, per_domain, pipe=pipe)
        if pipe is not None:
            pipe.execute()

    def settle(self, batch: str, staged: list[Staged], landed: dict[str, bool], minute: int,
               epoch: int | None = None, picks: list[Pick] | None = None) -> bool:
        """Step 3 (once per batch); False when somebody settled the batch already."""
        epoch = self.epoch if epoch is None else int(epoch)
        returned = [s for s in staged if not landed[s.domain]]
        crawls: dict[str, int] = defaultdict(int)
        types: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # type -> job -> tasks
        if picks is None:  # recovery: what the batch held is only in the staging hash
            picks = []
            for s in staged:
                task = json.loads(s.member)
                picks.append(Pick(s.member, s.job, s.domain, task["crawlid"], task["spider_type"], 0.0))
        touched: set[str] = set()  # the finisher's change log (frontier.finish_hints)
        for pick in picks:
            if landed[pick.domain]:
                crawls[pick.crawlid] += 1
                types[pick.spider_type][pick.job] += 1
                touched.add(finish_hints.member(pick.domain, pick.crawlid))
        type_names = list(types)
        args: list[Any] = [batch, epoch, minute, len(returned)]
        for s in returned:
            args += [s.member, s.score]
        args.append(len(crawls))
        for crawlid, n in crawls.items():
            args += [crawlid, n]
        args += [len(touched), *sorted(touched)]
        type_keys: list[str] = []
        for index, name in enumerate(type_names, start=1):
            type_keys += [keys.dispatched_minutes(name), keys.dispatched_jobs(name)]
            for job, n in types[name].items():
                args += [index, job, n]
        settled = self._settle(
            keys=[keys.SEEDS, keys.master_staging(epoch), keys.PENDING_SEEDS, keys.FINISH_CANDIDATES,
                  keys.MASTER_STAGING_EPOCHS, keys.FINISH_TOUCHED, *type_keys],
            args=args)
        # landed markers are done with; revoked ones stay until their TTL to refuse a late landing
        markers = [keys.dispatch_landed(domain, batch) for domain, ok in landed.items() if ok]
        if markers:
            pipe = self.redis.pipeline(transaction=False)
            if is_cluster(self.redis):  # each marker in its domain's slot: a DEL each
                for marker in markers:
                    pipe.delete(marker)
            else:  # a single server: one DEL for a chunk of them (was a DEL a domain of every batch)
                for start in range(0, len(markers), MARKERS_PER_DEL):
                    pipe.delete(*markers[start:start + MARKERS_PER_DEL])
            pipe.execute()
        return bool(settled)

    def move(self, picks: list[Pick], minute: int) -> dict[str, int]:
        """Stage, land and settle one batch; returns tasks placed per job."""
        batch, taken = self.stage(picks)
        if not taken:
            return {}
        landed = self.land(batch, taken)
        staged = [Staged(p.member, "", p.job, p.domain) for p in taken]
        if not all(landed.values()):  # revoked by a newer leader: return them at their exact old scores
            staged = self._read_batch(self.epoch, batch) or staged
        self.settle(batch, staged, landed, minute, picks=taken)
        placed: dict[str, int] = defaultdict(int)
        for pick in taken:
            if landed[pick.domain]:
                placed[pick.job] += 1
        return dict(placed)

    # --- recovery -------------------------------------------------------------------------------------------------
    def recover(self, minute: int) -> tuple[int, int]:
        """Settle every batch staged under older epochs; returns (tasks that had landed, tasks put back in seeds)."""
        landed_total = returned_total = 0
        for raw_epoch in self.redis.smembers(keys.MASTER_STAGING_EPOCHS):
            epoch = int(raw_epoch)
            if epoch == self.epoch:
                continue
            staging = keys.master_staging(epoch)
            for raw_batch, blob in self.redis.hgetall(staging).items():
                batch = as_text(raw_batch)
                staged = _parse(blob)
                # a domain that breaks the host rule has no marker (an older leader failed on it before landing
                # anything): its tasks go back to seeds, and from there to the dead letters
                domains = [d for d in dict.fromkeys(s.domain for s in staged) if host_problem(d) is None]
                decisions = run_scripts(self.redis, [
                    (self._revoke, [keys.dispatch_landed(domain, batch)], [MARKER_TTL]) for domain in domains])
                landed = {domain: as_text(decision) == "landed" for domain, decision in zip(domains, decisions,
                                                                                          strict=True)}
                landed.update((s.domain, False) for s in staged if s.domain not in landed)
                if self.settle(batch, staged, landed, minute, epoch=epoch):
                    landed_total += sum(1 for s in staged if landed[s.domain])
                    returned_total += sum(1 for s in staged if not landed[s.domain])
            if not self.redis.hlen(staging):
                self.redis.srem(keys.MASTER_STAGING_EPOCHS, epoch)
        return landed_total, returned_total

    # --- tasks that cannot be placed --------------------------------------------------------------------------------
    def dead_letter(self, letters: list[DeadLetter]) -> int:
        """Move tasks the dispatcher cannot place from ``seeds`` to the dead letters (fenced, one call); returns how
        many were still in ``seeds``. Raises LeadershipLost."""
        from redis.exceptions import ResponseError

        if not letters:
            return 0
        args: list[Any] = [self.epoch, DEAD_LETTER_CAP]
        for letter in letters:
            args += [letter.member, letter.crawlid, json.dumps(letter.record, ensure_ascii=False)]
        try:
            return int(self._dead_letter(keys=[keys.SEEDS, keys.MASTER_EPOCH, keys.PENDING_SEEDS,
                                               keys.FINISH_CANDIDATES, keys.DEAD_LETTERS, keys.DEAD_LETTER_COUNTS,
                                               keys.DEAD_LETTER_OUTBOX], args=args))
        except ResponseError as exc:
            if "FENCED" in str(exc):
                raise LeadershipLost(f"epoch {self.epoch} is no longer current") from exc
            raise

    def _read_batch(self, epoch: int, batch: str) -> list[Staged]:
        blob = self.redis.hget(keys.master_staging(epoch), batch)
        return _parse(blob) if blob else []


def send_dead_letters(redis: RedisClient, send: Callable[[list[dict[str, Any]]], None], limit: int = 500) -> int:
    """Produce the oldest waiting dead-letter records with ``send`` (returns once Kafka acknowledged them), then trim
    them off the outbox; returns how many. At least once: a crash between the two sends them again."""
    raw = redis.lrange(keys.DEAD_LETTER_OUTBOX, 0, limit - 1)
    if not raw:
        return 0
    send([json.loads(record) for record in raw])
    redis.ltrim(keys.DEAD_LETTER_OUTBOX, len(raw), -1)
    return len(raw)


def _parse(blob: Any) -> list[Staged]:
    return [Staged(member, str(score), job, domain) for member, score, job, domain in json.loads(blob)]

"""Stores items in MongoDB (seed 4.3.1.4 ③): ``ITEM_PIPELINES = {"spiders.pipelines.mongo.MongoPipeline": 900}``.

- One collection per crawl (``item["crawlid"]``) with a unique index on ``url_key``, the item's canonical URL
  (:func:`w3lib.url.canonicalize_url`), and an index on ``job`` (the manager's ``/items/`` of a job), created once
  per collection by this process. A document is the item
  without its ``_``-keys, plus ``url_key`` and ``stored_at`` (a UTC date: when the batch was written).
- Writes are batched: one ``bulk_write`` of ``ReplaceOne({"url_key": k}, doc, upsert=True)`` per collection,
  unordered. An upsert by canonical URL makes a redelivered task's item (a page fetched again after a crash) land
  exactly once, and makes a retried batch harmless whatever part of it had been written.
- When and how (:mod:`spiders.pipelines.buffer`): a batch is written when CRAWLFLEET_MONGO_BATCH items wait, every
  CRAWLFLEET_MONGO_FLUSH_SECONDS, and at close; the write runs in a thread (``deferToThread``), one at a time; a
  failed write is retried with back-off (0.5 s doubling to 10 s) until MongoDB answers, logging one line when it
  is lost, every 30 s while it stays down, and when it is back.
- Completion: :meth:`MongoPipeline.store` returns the Deferred of the contract: it fires with the item only when
  its batch was acknowledged by MongoDB, and never errbacks because MongoDB is down. ``process_item`` awaits it
  (Scrapy 2.19 deprecates pipelines that return Deferreds: they are coroutines now, without a ``spider``
  argument). A document MongoDB refuses for good (too large, not encodable) fails with
  :class:`~spiders.pipelines.buffer.Refused` (Scrapy's ``item_error``: processed, not stored).
- Back-pressure: :data:`spiders.signals.storage_backlog` is sent with ``full=True`` once CRAWLFLEET_MONGO_BUFFER
  items wait, and with ``full=False`` once they drain below half; the scheduler stops taking tasks in between.
- A store that refuses writes (issue 40): once every write has failed for ``messaging.storage.REPORT_AFTER`` seconds,
  :data:`spiders.signals.storage_state` carries a :class:`messaging.storage.StoreState` every second — since when,
  the server's reason and its kind (:func:`store_error`: unreachable, authentication, full, server error), the items
  waiting by crawl — and ``None`` once a write succeeds; the worker's heartbeat reports it to the cluster, where the
  crawl's page, ``crawlfleet info``, ``fleet status`` and the metrics say "storage refusing writes since T".
- Close: everything left is written, retrying up to :data:`CLOSE_TIMEOUT` seconds if MongoDB is down; then the
  number of items not written is logged. Their Deferreds never fire, so their tasks are not acknowledged and are
  crawled again after the lease expires.
- Counted: ``mongo/stored`` and ``mongo/refused`` in Scrapy's stats, and :attr:`MongoPipeline.stored`.
- Revisits (``frontier.revisit``): an item of a revisiting crawl carries ``_revisit`` (the page's main-text digest,
  the digest stored before, whether it changed). Its document is updated, not replaced: the item's fields, ``digest``,
  ``fetched_at``, ``changed_at`` (the fetch that saw the change), ``previous_digest`` and ``versions`` (+1 per
  changed fetch; a page re-fetched after a crash may count one more). Unchanged pages (304, same digest) yield no item
  and leave the document as it was. With CRAWLFLEET_MONGO_HISTORY the document's previous version is copied into
  ``<crawlid>.history`` (``url_key``, ``version``, the fields) before it is overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import bson
from bson.errors import InvalidDocument
from prometheus_client import Gauge
from pymongo import ReplaceOne, UpdateOne
from pymongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)
from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from w3lib.url import canonicalize_url

from messaging import clients, storage
from messaging.bounded import BoundedDict
from messaging.settings import Settings
from spiders.fleet_settings import crawlfleet_settings
from spiders.pipelines.buffer import Pending, WriteBuffer
from spiders.signals import storage_backlog, storage_state

logger = logging.getLogger(__name__)
# on the worker's /metrics (deploy/monitoring/alerts.yml: a store down)
STORE_UP = Gauge("crawlfleet_worker_store_up", "1 while this worker's item store takes writes, 0 from the first failed "
                 "write of an outage until a write succeeds.", ["store"])
ITEMS_WAITING = Gauge("crawlfleet_worker_items_waiting", "Items this worker holds that its item store has not "
                      "acknowledged yet.", ["store"])

URL_KEY = "url_key"
JOB = "job"  # the worker job that fetched the item (spiders.spiders.base)
CLOSE_TIMEOUT = 30.0  # seconds close_spider keeps retrying a MongoDB that is down before it gives up
INDEXED_KEPT = 1000  # crawls (collections) whose indexes a worker remembers having made
STATE_EVERY = 1.0  # seconds between two looks at the store's state (a report while it refuses writes)
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024  # MongoDB's BSON document limit
# Per-document write errors that are the document's fault: retrying cannot store it, so its item is refused for good
# (too large, a bad field name, a value MongoDB cannot hold, a validation rule). Any other write error — a concurrent
# upsert of the same URL (11000), a primary stepping down, a full cache or disk, an internal error, authorization —
# is the store's: the whole batch is retried (its upserts are idempotent) and nothing is lost meanwhile.
REFUSED_FOR_GOOD_CODES = frozenset({
    2,  # BadValue
    9,  # FailedToParse
    14,  # TypeMismatch
    22,  # InvalidBSON
    52,  # DollarPrefixedFieldName
    55,  # InvalidDBRef
    56,  # EmptyFieldName
    57,  # DottedFieldName
    121,  # DocumentValidationFailure
    10334,  # BSONObjectTooLarge
    17280,  # KeyTooLong
    17419,  # a document grown past 16 MB
})
AUTHENTICATION_CODES = frozenset({13, 18, 8000})  # Unauthorized, AuthenticationFailed, Atlas' AtlasError
FULL_CODES = frozenset({14031, 12})  # OutOfDiskSpace, a storage engine that cannot grow
FULL_WORDS = ("cache", "disk", "space", "quota")  # WT_CACHE_FULL, "No space left on device", over quota
CLIENT_OPTIONS = {
    # A write to a MongoDB that is down fails within seconds, so the back-off (not pymongo) paces the retries.
    "serverSelectionTimeoutMS": 5000,
    "connectTimeoutMS": 5000,
    "socketTimeoutMS": 60000,
}


def url_key(url: str) -> str:
    """The key documents are unique by: the canonical URL (sorted query, no fragment, normalised escapes)."""
    return canonicalize_url(url)


def document_of(item: dict[str, Any], key: str) -> dict[str, Any]:
    """What is stored of an item: every field except the internal ``_``-keys, plus its ``url_key``."""
    document = {name: value for name, value in item.items() if not name.startswith("_")}
    document[URL_KEY] = key
    return document


class MongoWriter:
    """The blocking write of one batch (called in a thread, one call at a time): index, then one bulk per collection.

    Returns the positions (in the batch) of documents MongoDB refused for good, with the reason; raises on
    anything worth retrying.
    """

    def __init__(self, database: Any, now: Callable[[], datetime] | None = None, history: bool = False) -> None:
        self.database = database
        self.history = history  # copy a revisited page's previous version into <crawlid>.history
        self.now = now or (lambda: datetime.now(UTC))
        # collections whose unique index this process has made sure of, the latest INDEXED_KEPT (one evicted is
        # asked again: create_index of an existing index is a no-op)
        self.indexed: BoundedDict[str, bool] = BoundedDict(INDEXED_KEPT, memo="items_indexed")

    def __call__(self, batch: Sequence[Pending]) -> dict[int, str]:
        refused: dict[int, str] = {}
        stored_at = self.now()
        for collection, positions in _by_collection(batch).items():
            self._ensure_index(collection)
            refused.update(self._write(collection, positions, batch, stored_at))
        return refused

    def _ensure_index(self, collection: str) -> None:
        if collection not in self.indexed:
            self.database[collection].create_index(URL_KEY, unique=True)
            self.database[collection].create_index(JOB)  # the manager's /items/ of one job
            self.indexed[collection] = True

    def _write(self, collection: str, positions: dict[str, list[int]], batch: Sequence[Pending],
               stored_at: datetime) -> dict[int, str]:
        # One operation per URL: two upserts of one key in an unordered bulk could race each other. The last item
        # of a URL wins (it is the newest fetch); every position of that URL shares its outcome.
        keys = list(positions)
        documents = [{**batch[positions[key][-1]].document, "stored_at": stored_at} for key in keys]
        revisits = [_revisit_of(batch[positions[key][-1]].item) for key in keys]
        if self.history and any(revisits):
            self._keep_history(collection, [key for key, revisit in zip(keys, revisits, strict=True) if revisit])
        operations = [_operation(key, doc, revisit)
                      for key, doc, revisit in zip(keys, documents, revisits, strict=True)]
        try:
            self.database[collection].bulk_write(operations, ordered=False)
        except InvalidDocument as exc:
            # The driver refused the bulk before sending it: encode one by one to tell which documents cannot be
            # stored (if none alone, refuse them all rather than retry a batch that can never be written).
            bad = _unencodable(keys, documents) or {key: f"not storable: {exc}" for key in keys}
            rest = {key: where for key, where in positions.items() if key not in bad}
            refused = self._write(collection, rest, batch, stored_at) if rest else {}
            refused.update(_positions(positions, bad))
            return refused
        except BulkWriteError as exc:
            return _positions(positions, _refused_by_server(exc, keys))
        return {}


    def _keep_history(self, collection: str, keys: Sequence[str]) -> None:
        history = self.database[f"{collection}.history"]
        for previous in self.database[collection].find({URL_KEY: {"$in": list(keys)}}):
            previous.pop("_id", None)
            version = int(previous.get("versions") or 1)
            history.replace_one({URL_KEY: previous[URL_KEY], "version": version}, {**previous, "version": version},
                                upsert=True)


def _revisit_of(item: Any) -> dict[str, Any] | None:
    revisit = item.get("_revisit") if isinstance(item, dict) else None
    return revisit if isinstance(revisit, dict) else None


def _operation(key: str, document: dict[str, Any], revisit: dict[str, Any] | None) -> Any:
    """A plain item replaces its document; a revisited page's item updates it (see the module docstring)."""
    if revisit is None:
        return ReplaceOne({URL_KEY: key}, document, upsert=True)
    fields = {**document, "digest": revisit.get("digest") or None}
    if revisit.get("changed"):
        fields["changed_at"] = document.get("fetched_at")
        if revisit.get("previous_digest"):
            fields["previous_digest"] = revisit["previous_digest"]
    update: dict[str, Any] = {"$set": fields}
    if revisit.get("changed"):
        update["$inc"] = {"versions": 1}
    return UpdateOne({URL_KEY: key}, update, upsert=True)


def _positions(positions: dict[str, list[int]], by_key: dict[str, str]) -> dict[int, str]:
    return {position: reason for key, reason in by_key.items() for position in positions[key]}


def _by_collection(batch: Sequence[Pending]) -> dict[str, dict[str, list[int]]]:
    grouped: dict[str, dict[str, list[int]]] = {}
    for position, pending in enumerate(batch):
        grouped.setdefault(pending.collection, {}).setdefault(pending.key, []).append(position)
    return grouped


def _unencodable(keys: Sequence[str], documents: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Documents that cannot be stored at all (only looked for after the driver refused a bulk: the normal path
    pays for one encoding, the driver's)."""
    refused: dict[str, str] = {}
    for key, document in zip(keys, documents, strict=True):
        try:
            size = len(bson.encode(document))
        except (InvalidDocument, TypeError, OverflowError) as exc:
            refused[key] = f"not storable: {exc}"
            continue
        if size > MAX_DOCUMENT_BYTES:
            refused[key] = f"document of {size} bytes exceeds MongoDB's {MAX_DOCUMENT_BYTES}"
    return refused


def _refused_by_server(error: BulkWriteError, keys: Sequence[str]) -> dict[str, str]:
    """The documents MongoDB refused for good (:data:`REFUSED_FOR_GOOD_CODES`); raises again when any error is the
    store's, or a write concern failed."""
    details = error.details or {}
    errors = details.get("writeErrors") or []
    if details.get("writeConcernErrors") or any(e.get("code") not in REFUSED_FOR_GOOD_CODES for e in errors):
        raise error  # the whole batch again: its upserts are idempotent
    return {keys[e["index"]]: f"error {e.get('code')}: {e.get('errmsg', '')}" for e in errors}


def store_error(error: BaseException) -> tuple[str, str]:
    """(reason, kind) of a failed write, as an operator reads it: the server's own words and code, or the connection
    problem; ``kind`` is one of :data:`messaging.storage.KINDS`."""
    code, message = None, " ".join(str(error).split())
    if isinstance(error, BulkWriteError):
        first = ((error.details or {}).get("writeErrors") or [{}])[0]
        code, message = first.get("code"), " ".join(str(first.get("errmsg", message)).split())
    elif isinstance(error, OperationFailure):
        details = error.details or {}
        code = error.code
        name = details.get("codeName")
        message = " ".join(str(details.get("errmsg") or message).split()) + (f" ({name})" if name else "")
    elif isinstance(error, ConnectionFailure):  # pymongo appends its timeouts and the topology: not the reason
        message = message.split(" (configured timeouts:")[0].split(", Timeout:")[0]
    reason = f"{type(error).__name__}: {message[:300]}" + (f" [code {code}]" if code is not None else "")
    if isinstance(error, (ConnectionFailure, ServerSelectionTimeoutError, NetworkTimeout, AutoReconnect)):
        return reason, storage.UNREACHABLE
    if code in AUTHENTICATION_CODES or isinstance(error, ConfigurationError):
        return reason, storage.AUTHENTICATION
    if code in FULL_CODES or any(word in message.lower() for word in FULL_WORDS):
        return reason, storage.FULL
    return reason, storage.SERVER_ERROR


class MongoPipeline:
    """Batched, acknowledged, retried writes of items to MongoDB; see the module docstring."""

    def __init__(self, settings: Settings, *, stats: Any = None, signals: Any = None, clock: Any = None,
                 run_in_thread: Callable[..., Deferred[Any]] | None = None,
                 client_factory: Callable[[Settings], Any] | None = None,
                 close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.settings = settings
        self.stats = stats
        self.signals = signals
        self.close_timeout = close_timeout
        self._client_factory = client_factory or (lambda s: clients.mongo_client(s, **CLIENT_OPTIONS))
        self._client: Any = None
        self.writer: MongoWriter | None = None
        self.buffer = WriteBuffer(
            self._write, batch=settings.mongo_batch, flush_seconds=settings.mongo_flush_seconds,
            capacity=settings.mongo_buffer, on_backlog=self._backlog, on_written=self._written, clock=clock,
            run_in_thread=run_in_thread, transient=(PyMongoError,), store="MongoDB")
        self._state_loop = LoopingCall(self._report_state)
        self._state_loop.clock = self.buffer.clock
        self._reported = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> MongoPipeline:
        return cls(crawlfleet_settings(crawler.settings), stats=crawler.stats, signals=crawler.signals)

    @property
    def stored(self) -> int:
        """Items acknowledged by MongoDB since the pipeline opened."""
        return self.buffer.written

    @property
    def waiting(self) -> int:
        return self.buffer.waiting

    # --- Scrapy's interface ------------------------------------------------------------------------------------
    def open_spider(self) -> None:
        # pymongo connects in its own background threads: creating the client does not wait on the network
        # (except for a mongodb+srv:// URI's DNS lookup, once per process).
        self._client = self._client_factory(self.settings)
        self.writer = MongoWriter(self._client[self.settings.mongo_db], history=self.settings.mongo_history)
        self.buffer.start()
        self._state_loop.start(STATE_EVERY, now=False)
        buffer = self.buffer  # read when scraped (one pipeline per worker process)
        STORE_UP.labels("mongodb").set_function(lambda: 0.0 if buffer.down else 1.0)
        ITEMS_WAITING.labels("mongodb").set_function(lambda: float(buffer.waiting))

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        return await maybe_deferred_to_future(self.store(item))

    async def close_spider(self) -> None:
        await maybe_deferred_to_future(self.close())

    # --- the same without a coroutine (the contract's Deferred; tests) -------------------------------------------
    def store(self, item: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """Queue an item; the Deferred fires with it once MongoDB acknowledged its batch."""
        crawlid, url = item.get("crawlid"), item.get("url")
        if not crawlid or not url:
            raise DropItem(f"cannot store an item without {'crawlid' if not crawlid else 'url'}")
        key = url_key(url)
        return self.buffer.add(str(crawlid), key, document_of(item, key), item)

    def close(self) -> Deferred[int]:
        """Write what waits (bounded by ``close_timeout``); fires with how many items were not written."""
        if self._state_loop.running:
            self._state_loop.stop()
        done = self.buffer.close(self.close_timeout)
        done.addCallback(self._closed)
        return done

    def state(self) -> storage.StoreState | None:
        """The store refusing writes for at least ``messaging.storage.REPORT_AFTER`` seconds, or None."""
        since = self.buffer.down_since
        if since is None or self.buffer.clock.seconds() - since < storage.REPORT_AFTER:
            return None
        error = self.buffer.last_error
        reason, kind = store_error(error) if error is not None else ("no answer yet", storage.UNREACHABLE)
        return storage.StoreState(since, reason, kind, self.buffer.waiting, storage.largest(self.buffer.waiting_by()))

    # --- internals ---------------------------------------------------------------------------------------------
    def _report_state(self) -> None:
        """Every second: the state while the store refuses writes, once ``None`` when it takes them again."""
        state = self.state()
        if state is None and not self._reported:
            return
        if state is not None and not self._reported:
            logger.warning("MongoDB refusing writes since %s: %s; %d items waiting", storage.when(state.since),
                           state.reason, state.waiting)
        self._reported = state is not None
        if self.signals is not None:
            self.signals.send_catch_log(signal=storage_state, state=state)

    def _write(self, batch: Sequence[Pending]) -> dict[int, str]:
        assert self.writer is not None, "open_spider() was not called"
        return self.writer(batch)

    def _written(self, stored: int, refused: int) -> None:
        if self.stats is not None:
            if stored:
                self.stats.inc_value("mongo/stored", stored)
            if refused:
                self.stats.inc_value("mongo/refused", refused)

    def _backlog(self, full: bool, waiting: int) -> None:
        if full:
            logger.warning("MongoDB buffer full: %d items waiting to be written; taking no new tasks", waiting)
        else:
            logger.info("MongoDB buffer drained to %d items waiting; taking tasks again", waiting)
        if self.signals is not None:
            self.signals.send_catch_log(signal=storage_backlog, full=full, waiting=waiting)

    def _closed(self, left: int) -> Deferred[int] | int:
        if left:
            logger.error("MongoDB pipeline closed with %d items not written (MongoDB unreachable for %.0fs): their "
                         "tasks are not acknowledged and will be crawled again", left, self.close_timeout)
        else:
            logger.info("MongoDB pipeline closed: %d items stored", self.stored)
        return self._release(left)

    def _release(self, left: int) -> Deferred[int] | int:
        if self._client is None or left:
            return left  # with items left, a write may still run in its thread: let it finish or fail
        client, self._client = self._client, None
        # close() ends the client's sessions on the server: a network call, so not on the reactor.
        released = self.buffer.run_in_thread(client.close)
        released.addErrback(lambda failure: logger.debug("closing the MongoDB client: %s", failure.value))
        return released.addCallback(lambda _: left)

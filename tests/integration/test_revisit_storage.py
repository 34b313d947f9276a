"""A revisited page's MongoDB document (spiders.pipelines.mongo.MongoWriter) on the real MongoDB-wire server:
updated in place, versions counted, the previous version kept in the history collection when asked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from twisted.internet.defer import Deferred

from spiders.pipelines.buffer import Pending
from spiders.pipelines.mongo import MongoWriter, document_of, url_key

pytestmark = pytest.mark.integration


def pending(item: dict[str, Any]) -> Pending:
    key = url_key(item["url"])
    return Pending(item["crawlid"], key, document_of(item, key), item, Deferred())


def item(fetched_at: str, text: str, revisit: dict[str, Any]) -> dict[str, Any]:
    return {"url": "http://a.test/x.html", "crawlid": "c", "fetched_at": fetched_at, "text": text,
            "_revisit": revisit}


def test_versions_changed_at_previous_digest_and_history(cf) -> None:
    db = cf.mongo()
    writer = MongoWriter(db, now=lambda: datetime(2026, 1, 1, tzinfo=UTC), history=True)
    assert writer([pending(item("T1", "one", {"digest": "d1", "previous_digest": "", "changed": True}))]) == {}
    assert writer([pending(item("T2", "two", {"digest": "d2", "previous_digest": "d1", "changed": True}))]) == {}
    [document] = list(db["c"].find({}, {"_id": 0}))
    assert {k: document[k] for k in ("text", "digest", "previous_digest", "versions", "fetched_at", "changed_at")} == {
        "text": "two", "digest": "d2", "previous_digest": "d1", "versions": 2, "fetched_at": "T2", "changed_at": "T2"}
    [old] = list(db["c.history"].find({}, {"_id": 0}))
    assert (old["version"], old["text"], old["digest"]) == (1, "one", "d1")
    # a plain item (a crawl without revisits) still replaces its document
    plain = {"url": "http://a.test/y.html", "crawlid": "c", "text": "y"}
    assert writer([pending(plain)]) == {}
    assert db["c"].find_one({"url": "http://a.test/y.html"}, {"_id": 0, "stored_at": 0, "url_key": 0}) == {
        "url": "http://a.test/y.html", "crawlid": "c", "text": "y"}

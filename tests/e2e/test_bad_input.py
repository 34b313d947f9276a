"""10,000 malformed messages: the Kafka monitor stays up and puts every one on the failed topic with its reason."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

import pytest

from deploy.procs import wait_for
from messaging import clients, keys
from messaging.answers import partitions_of

pytestmark = pytest.mark.e2e

COUNT = 10_000
MAX_BYTES = 4096
RULE = {"first_page_xpath": {"list_from": "//li"}}


def crawl(marker: str, **fields: object) -> dict[str, object]:
    message: dict[str, object] = {"userid": "eve", "crawlid": marker, "url": "http://example.com/", "rule": RULE,
                                  "spider_type": "list"}
    message.update(fields)
    return {key: value for key, value in message.items() if value is not None}


def as_json(message: object) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode()


# (what is wrong, a message with the marker in it, words the reason must contain)
CASES: list[tuple[str, Callable[[str], bytes], str]] = [
    ("truncated JSON", lambda m: f'{{"crawlid": "{m}", '.encode(), "invalid JSON"),
    ("trailing garbage", lambda m: f'{{"crawlid": "{m}"}} ]'.encode(), "invalid JSON"),
    ("single quotes", lambda m: f"{{'crawlid': '{m}'}}".encode(), "invalid JSON"),
    ("NaN", lambda m: f'{{"crawlid": "{m}", "priority": NaN}}'.encode(), "invalid JSON"),
    ("byte order mark", lambda m: b"\xef\xbb\xbf" + as_json(crawl(m)), "invalid JSON"),
    ("array", lambda m: as_json([m]), "not an array"),
    ("string", lambda m: as_json(m), "not a string"),
    ("number with marker", lambda m: f'[{m[2:-2]}, "{m}"]'.encode(), "not an array"),
    ("unknown kind", lambda m: as_json({"hello": m}), "unknown request kind"),
    ("bad action", lambda m: as_json({"action": "explode", "crawlid": m}), "$.action"),
    ("action of wrong type", lambda m: as_json({"action": 5, "crawlid": m}), "$.action"),
    ("priority as text", lambda m: as_json(crawl(m, priority="high")), "$.priority"),
    ("priority too big", lambda m: as_json(crawl(m, priority=10**6)), "$.priority"),
    ("maxdepth float", lambda m: as_json(crawl(m, maxdepth=1.5)), "$.maxdepth"),
    ("missing rule", lambda m: as_json(crawl(m, rule=None)), "'rule' is a required property"),
    ("missing userid", lambda m: as_json(crawl(m, userid=None)), "'userid' is a required property"),
    ("rule not an object", lambda m: as_json(crawl(m, rule=["//li"])), "$.rule"),
    ("oversize", lambda m: as_json(crawl(m, cookie={"big": "x" * MAX_BYTES})), "larger than the limit"),
    ("ftp URL", lambda m: as_json(crawl(m, url="ftp://example.com/file")), "$.url"),
    ("javascript URL", lambda m: as_json(crawl(m, url="javascript:alert(1)")), "$.url"),
    ("relative URL", lambda m: as_json(crawl(m, url="/index.html")), "$.url"),
    ("URL without host", lambda m: as_json(crawl(m, url="http://:80/")), "$.url"),
    ("bad XPath", lambda m: as_json(crawl(m, rule={"first_page_xpath": {"list_from": "//li[@"}})),
     "is not a valid XPath"),
    ("unknown XPath function", lambda m: as_json(crawl(m, rule={"first_page_xpath": {"list_from": "//x[f()]"}})),
     "is not a valid XPath"),
    ("XPath that can select no element", lambda m: as_json(crawl(m, rule={"first_page_xpath": {
        "list_from": "count(//li)"}})), "not a node-set"),
    ("bad regex", lambda m: as_json(crawl(m, spider_type="universal", rule={"rules": [{"allow": "(?<"}]})),
     "is not a valid regular expression"),
    ("universal rule for list", lambda m: as_json(crawl(m, rule={"rules": [{"follow": True}]})),
     "'first_page_xpath' is a required property"),
    ("lone surrogate", lambda m: f'{{"crawlid": "{m}", "userid": "\\udc00"}}'.encode(), "surrogate"),
    ("invalid UTF-8", lambda m: f'{{"crawlid": "{m}", "userid": "'.encode() + b'\xc3\x28"}', "not UTF-8"),
    ("zero-width space in id", lambda m: as_json(crawl(m, userid="eve\u200b")), "$.userid"),
    ("right-to-left override in URL", lambda m: as_json(crawl(m, url="http://example.com/\u202egpj.exe")),
     "invisible character"),
    ("emoji id", lambda m: as_json(crawl(m, userid="😀")), "$.userid"),
    ("deep nesting", lambda m: (f'{{"crawlid": "{m}", "rule": ' + "[" * 2000 + "]" * 2000 + "}").encode(),
     "depth limit"),
    ("empty", lambda m: f"   {m}"[:-len(m)].encode(), "invalid JSON"),
    ("stats of unknown module", lambda m: as_json({"stats": "nope", "userid": "eve", "uuid": m}), "$.stats"),
    ("site with bad domain", lambda m: as_json({"action": "rate", "userid": "eve", "domain": "a b", "rate": 1,
                                                "uuid": m}), "$.domain"),
    ("negative rate", lambda m: as_json({"action": "rate", "userid": "eve", "domain": "example.com", "rate": -1,
                                         "uuid": m}), "$.rate"),
    ("info without crawlid", lambda m: as_json({"action": "info", "userid": "eve", "uuid": m}),
     "'crawlid' is a required property"),
]
MARKER = re.compile(r"m-(\d+)-m")


def test_ten_thousand_malformed_messages_all_fail_with_reasons(cf, procs):
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name, CRAWLFLEET_MAX_MESSAGE_BYTES=str(MAX_BYTES),
                      CRAWLFLEET_KAFKA_MONITOR_BATCH="5000")
    monitor = procs.crawlfleet("kafka-monitor", env=env)
    procs.wait_log(monitor, f"partitions assigned: {cf.settings.topic_incoming}[", 60)

    expected: dict[int, tuple[str, str]] = {}
    producer = clients.kafka_producer(cf.settings, value_serializer=None, batch_size=512 * 1024, linger_ms=20)
    for i in range(COUNT):
        name, make, words = CASES[i % len(CASES)]
        expected[i] = (name, words)
        producer.send(cf.settings.topic_incoming, make(f"m-{i}-m"))
    producer.flush(timeout=60)
    producer.close()

    consumer = clients.kafka_consumer(cf.settings, group_id=None, max_poll_records=5000)
    consumer.assign(partitions_of(consumer, cf.settings.topic_failed))
    consumer.seek_to_beginning()
    failed = []

    def all_failed() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            failed.extend(json.loads(record.value) for record in records)
        return len(failed) >= COUNT

    try:
        wait_for(all_failed, 240, f"{COUNT} records on the failed topic", interval=0,
                 alive=lambda: f"the monitor exited:\n{procs.log(monitor)[-2000:]}" if monitor.poll() else None)
    finally:
        consumer.close()

    assert monitor.poll() is None, "the monitor stays up"
    assert len(failed) == COUNT
    seen: Counter[int] = Counter()
    for record in failed:
        found = MARKER.search(record["original"])
        number = int(found.group(1)) if found else _empty_case_number(record, seen)
        seen[number] += 1
        name, words = expected[number]
        assert words in record["reason"], f"{name}: {record['reason']!r}"
        assert record["reason"].startswith(record["path"] + ": ")
        assert record["source"]["topic"] == cf.settings.topic_incoming
    assert len(seen) == COUNT and set(seen.values()) == {1}

    redis = cf.redis()
    assert redis.zcard(keys.SEEDS) == 0
    wait_for(lambda: int(redis.get(keys.stats_counter("kafka-monitor", "rejected", "lifetime")) or 0) == COUNT, 10,
             "every rejection counted")
    producer = clients.kafka_producer(cf.settings)
    producer.send(cf.settings.topic_incoming, crawl("after-the-storm"))
    producer.flush(timeout=30)
    producer.close()
    wait_for(lambda: redis.zcard(keys.SEEDS) == 1, 30, "a valid request after the storm to be enqueued")


def _empty_case_number(record: dict, seen: Counter[int]) -> int:
    """Empty messages carry no marker: give each the next unseen number of the "empty" case."""
    position = next(index for index, case in enumerate(CASES) if case[0] == "empty")
    assert record["original"].strip() == "", record
    number = position
    while seen[number]:
        number += len(CASES)
    return number

"""Pure logic of schedules and alerts: cron due times (zones, daylight saving, seconds), crawl ids, HMAC signatures,
redaction, back-off and which events a finished crawl stands for."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from master.notifier import backoff, retry_after_seconds
from master.stalls import progress_of
from messaging.notify import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Target,
    delivery,
    finish_events,
    redacted_request,
    sign,
    verify,
)
from messaging.schedules import InvalidSchedule, check_name, crawl_id, due_times, next_due
from messaging.settings import SETTINGS, redact_url

pytestmark = pytest.mark.unit

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, tz: ZoneInfo = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


def local(seconds: float, tz: ZoneInfo = BERLIN) -> str:
    return datetime.fromtimestamp(seconds, tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def test_next_due_times_in_a_time_zone_follow_its_clock_across_daylight_saving() -> None:
    times = due_times("0 3 * * *", "Europe/Berlin", at("2025-03-28 12:00"), at("2025-04-01 00:00"))
    assert [local(t) for t in times] == ["2025-03-29 03:00:00 CET", "2025-03-30 03:00:00 CEST",
                                         "2025-03-31 03:00:00 CEST"]
    assert times[1] - times[0] == 23 * 3600  # the night the clocks go forward is an hour short


def test_a_time_skipped_by_daylight_saving_fires_once_and_a_repeated_hour_fires_once() -> None:
    spring = due_times("30 2 * * *", "Europe/Berlin", at("2025-03-29 12:00"), at("2025-03-31 12:00"))
    assert [local(t) for t in spring] == ["2025-03-30 03:00:00 CEST", "2025-03-31 02:30:00 CEST"]
    autumn = due_times("30 2 * * *", "Europe/Berlin", at("2025-10-25 12:00"), at("2025-10-27 12:00"))
    assert len(autumn) == 2 and len(set(autumn)) == 2  # 02:30 happens twice on the 26th; it fires once that day
    assert local(autumn[0]).startswith("2025-10-26 02:30")
    night = due_times("*/30 * * * *", "Europe/Berlin", at("2025-10-26 01:50"), at("2025-10-26 03:10"))
    assert [local(t) for t in night] == ["2025-10-26 02:00:00 CEST", "2025-10-26 02:30:00 CEST",
                                         "2025-10-26 02:00:00 CET", "2025-10-26 02:30:00 CET",
                                         "2025-10-26 03:00:00 CET"]  # a wildcard follows real time


def test_five_fields_or_six_with_seconds_first_and_nothing_else() -> None:
    start = at("2025-06-01 00:00:00", UTC)
    assert due_times("*/20 * * * * *", "UTC", start, start + 60) == [start + 20, start + 40, start + 60]
    assert next_due("0 3 * * *", "UTC", start) == start + 3 * 3600
    assert next_due("@hourly", "UTC", start) == start + 3600
    for bad, reason in (("* * * *", "five fields"), ("0 0 1 1 * 2030 x", "five fields"), ("61 * * * *", "61"),
                        ("0 0 30 2 *", "never comes due")):
        with pytest.raises(InvalidSchedule, match=reason):
            next_due(bad, "UTC", start)
    with pytest.raises(InvalidSchedule, match="time zone"):
        next_due("* * * * *", "Nowhere/Land", start)


def test_due_times_are_bounded_and_strictly_after_the_mark() -> None:
    start = at("2025-06-01 00:00:00", UTC)
    assert due_times("* * * * *", "UTC", start, start + 600, limit=3) == [start + 60, start + 120, start + 180]
    assert due_times("* * * * *", "UTC", start + 60, start + 60) == []


def test_crawl_ids_name_the_schedule_and_the_due_time_in_utc() -> None:
    due = at("2025-06-01 03:00:00")  # Berlin summer time: 01:00 UTC
    assert crawl_id("nightly", due) == "nightly-20250601T010000Z"
    check_name("a" * 111)
    for bad in ("a" * 112, "", "-x", "a b", "a:b"):
        with pytest.raises(InvalidSchedule):
            check_name(bad)


def test_the_signature_is_the_hmac_sha256_of_the_body_and_covers_the_timestamp() -> None:
    payload = {"event": "finished", "id": "finished:c@1.0", "crawlid": "c", "pages": 3}
    body, headers = delivery(payload, attempt=2, timestamp=1_750_000_000, secret="s3cret")
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"sha256={expected}" == sign("s3cret", body)
    assert verify("s3cret", body, headers[SIGNATURE_HEADER]) and not verify("other", body, headers[SIGNATURE_HEADER])
    assert headers[TIMESTAMP_HEADER] == "1750000000" and headers[IDEMPOTENCY_HEADER] == "finished:c@1.0"
    data = json.loads(body)
    assert data["timestamp"] == 1_750_000_000 and data["attempt"] == 2 and data["pages"] == 3
    assert not verify("s3cret", body.replace(b"1750000000", b"1750000999"), headers[SIGNATURE_HEADER])
    _, unsigned = delivery(payload, attempt=1, timestamp=1, secret="")
    assert SIGNATURE_HEADER not in unsigned


def test_urls_and_secrets_are_redacted_for_logs_and_pages() -> None:
    assert redact_url("https://bob:pw@hooks.test/x/y?token=abc#frag") == "https://***@hooks.test/x/y?***"
    assert redact_url("http://hooks.test/in") == "http://hooks.test/in"
    request = {"url": "http://a.test/", "notify": {"url": "http://h.test/?key=k", "on": ["finished"]}}
    assert redacted_request(request)["notify"]["url"] == "http://h.test/?***"
    assert request["notify"]["url"] == "http://h.test/?key=k"  # the original is untouched
    assert SETTINGS["CRAWLFLEET_NOTIFY_SECRET"].shown("s3cret") == "(set, hidden)"
    assert SETTINGS["CRAWLFLEET_NOTIFY_URL"].shown("http://h.test/?key=k") == "http://h.test/?***"
    assert SETTINGS["CRAWLFLEET_NOTIFY_TIMEOUT"].shown(10.0) == "10.0"


def test_targets_come_from_the_crawl_or_the_fleet_default() -> None:
    own = Target.of(json.dumps({"url": "http://own.test/", "on": ["stalled"]}), "http://default.test/")
    assert own == Target("http://own.test/", frozenset({"stalled"}))
    assert Target.of(json.dumps({"url": "http://own.test/"})).on == frozenset({"finished", "failed", "stalled",
                                                                               "empty"})
    assert Target.of(None, "http://default.test/", "finished, empty").on == frozenset({"finished", "empty"})
    assert Target.of(None, "") is None


def test_a_finished_crawl_is_finished_and_failed_or_empty() -> None:
    finished = {"event": "crawl_finished", "event_id": "c@5.0", "crawlid": "c", "userid": "u", "pages": 4,
                "items": 2, "failures": {}, "start_failure": None, "finished": 5.0, "duration": 3.0}
    assert [e["event"] for e in finish_events(finished)] == ["finished"]
    assert finish_events(finished)[0]["id"] == "finished:c@5.0"
    empty = finish_events({**finished, "items": 0})
    assert [(e["event"], e["id"]) for e in empty] == [("finished", "finished:c@5.0"), ("empty", "empty:c@5.0")]
    failed = finish_events({**finished, "pages": 1, "items": 0, "start_failure": "HTTP 404"})
    assert [e["event"] for e in failed] == ["finished", "failed"] and "HTTP 404" in failed[1]["reason"]
    dead = finish_events({**finished, "pages": 0, "items": 0}, dead_letters=1)
    assert [e["event"] for e in dead] == ["finished", "failed"] and "dead-lettered" in dead[1]["reason"]


def test_backoff_doubles_up_to_its_bound_and_retry_after_is_read() -> None:
    assert [backoff(n, 2, 30) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]
    assert retry_after_seconds("120") == 120 and retry_after_seconds(None) == 0 and retry_after_seconds("soon") == 0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # in the past


def test_progress_is_the_sum_of_what_completed_tasks_count() -> None:
    assert progress_of({b"pages": b"4", b"items": b"9", b"restored": b"1", b"failed:HTTP 404": b"2",
                        b"start": b"HTTP 404"}) == (7, {"pages": 4, "items": 9})

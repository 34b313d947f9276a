"""The pure parts of pause and resume and of failed URLs: the request kinds through the registry, the state channel's
messages, a task's retry number, which reasons are listed, and the failures' JSON lines and CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest

from messaging import failures, request_kinds
from messaging.counts import BLACKLISTED, NOINDEX, ROBOTS, listed_reason
from messaging.pause import parse_state_message
from messaging.settings import load
from messaging.tasks import Task
from messaging.validation import Rejected, detect_kind, parse_request

pytestmark = pytest.mark.unit


def test_pause_and_resume_are_request_kinds_of_the_registry(tmp_path):
    assert detect_kind({"action": "pause"}) == "pause" and detect_kind({"action": "resume"}) == "resume"
    request = parse_request({"action": "pause", "userid": "ops", "crawlid": "news-1", "uuid": "u1"})
    assert request.kind == "pause"
    with pytest.raises(Rejected, match=r"'crawlid' is a required property"):
        parse_request({"action": "resume", "userid": "ops", "uuid": "u2"})
    with pytest.raises(Rejected, match=r"\$\.crawlid"):
        parse_request({"action": "pause", "userid": "ops", "crawlid": "no spaces", "uuid": "u3"})
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    assert {"messaging.kafka_monitor.plugins.pause.PausePlugin",
            "messaging.kafka_monitor.plugins.pause.ResumePlugin"} <= set(request_kinds.kafka_chain(settings))
    assert {"messaging.redis_monitor.plugins.pause.PausePlugin",
            "messaging.redis_monitor.plugins.pause.ResumePlugin"} <= set(request_kinds.redis_chain(settings))
    assert {"deploy.cli_pause:pause", "deploy.cli_pause:resume"} <= set(request_kinds.commands())


def test_state_messages_name_the_crawl_and_its_state():
    assert parse_state_message(b"news-1 paused") == ("news-1", "paused")
    assert parse_state_message("news-1 running\n") == ("news-1", "running")
    assert parse_state_message(b"garbage") is None and parse_state_message(b"") is None


def test_a_tasks_retry_number_is_in_its_json_only_when_it_has_one():
    task = Task(url="http://a.test/1", crawlid="c", spider_type="list", depth=2, callback="detail")
    assert "retry" not in task.encode()  # every task before retries existed keeps its member
    retried = Task(**{**json.loads(task.encode()), "retry": 3})
    assert json.loads(retried.encode())["retry"] == 3 and Task.decode(retried.encode()) == retried
    assert task.child("http://a.test/2").retry == 0  # its children are ordinary tasks


def test_only_real_failures_are_listed():
    assert all(listed_reason(reason) for reason in ("HTTP 404", "HTTP 500", "DownloadTimeoutError", "DNSLookupError"))
    assert not any(listed_reason(reason) for reason in (ROBOTS, BLACKLISTED, NOINDEX, ""))


ROWS = [{"url": "http://a.test/x", "reason": "HTTP 500", "status": 500, "attempts": 3,
         "time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "first": datetime(2026, 1, 1, tzinfo=UTC), "retry": 0,
         "submitted": 0, "job": "w-1"},
        {"url": 'http://a.test/"quoted",comma', "reason": "DownloadTimeoutError", "status": None, "attempts": 1,
         "time": None, "first": None, "retry": 1, "submitted": 1, "job": "w-2"}]


def test_failures_export_as_json_lines_and_as_csv_for_spreadsheets():
    lines = b"".join(failures.export(ROWS, "jsonl")).decode("utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]
    assert [row["url"] for row in parsed] == [row["url"] for row in ROWS]
    assert parsed[0]["time"] == "2026-01-02T03:04:05+00:00" and parsed[1]["status"] is None
    data = b"".join(failures.export(ROWS, "csv"))
    assert data.startswith("\ufeff".encode())  # a byte order mark: spreadsheets read UTF-8
    table = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    assert table[0] == failures.COLUMNS
    assert table[2][:4] == ['http://a.test/"quoted",comma', "DownloadTimeoutError", "", "1"]  # quoted, None empty
    with pytest.raises(ValueError, match="unknown format"):
        list(failures.export(ROWS, "parquet"))

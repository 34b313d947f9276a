"""The manager's parts without services: queue, history, jobs' command lines, configuration and its defences."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from manager.config import InsecureBind, ManagerConfig, is_loopback, parse_auth
from manager.history import SqliteJobHistory
from manager.jobs import InvalidJob, Job, JobRecord
from manager.poller import QueuePoller
from manager.queue import SqlitePendingQueue
from manager.security import CsrfToken, cross_site_reason, host_allowed, safe_log_file, state_change_refusal
from messaging.settings import load

pytestmark = pytest.mark.unit


def test_pending_queue_pops_by_priority_then_arrival_and_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "pending.db"
    queue = SqlitePendingQueue(path)
    for name, priority in (("a", 0), ("b", 5), ("c", 0), ("d", 5)):
        queue.add(Job("list", name, priority, settings={"CLOSESPIDER_TIMEOUT": "5"}, args={"x": "1"}))
    assert [job.job for job in queue.list()] == ["b", "d", "a", "c"]
    assert queue.remove("d") and not queue.remove("d")
    queue.close()
    reopened = SqlitePendingQueue(path)
    assert reopened.count() == 3
    first = reopened.pop()
    assert first is not None and first.job == "b" and first.settings == {"CLOSESPIDER_TIMEOUT": "5"}
    assert [reopened.pop().job, reopened.pop().job, reopened.pop()] == ["a", "c", None]


def test_poller_hands_one_job_per_waiting_slot() -> None:
    queue = SqlitePendingQueue(":memory:")
    poller = QueuePoller(queue)
    for name in ("a", "b", "c"):
        queue.add(Job("list", name))
    got: list[str] = []
    for _ in range(2):
        poller.next().addCallback(lambda job: got.append(job.job))
    poller.poll()
    assert got == ["a", "b"] and queue.count() == 1  # two slots, two jobs: the third waits in SQLite


def test_history_is_bounded_and_latest_first(tmp_path: Path) -> None:
    history = SqliteJobHistory(tmp_path / "jobs.db", keep=3)
    for n in range(5):
        history.add(JobRecord("crawlfleet", "list", f"j{n}", 100 + n, 1000.0 + n, 1010.0 + n, 0, f"/l/j{n}.log"))
    assert [r.job for r in history.list()] == ["j4", "j3", "j2"] and len(history) == 3
    assert history.get("j3").pid == 103 and history.get("j0") is None


def test_a_job_is_an_argument_list_with_its_id_as_the_worker_job() -> None:
    job = Job("universal", "u-1", settings={"CLOSESPIDER_TIMEOUT": "5"}, args={"note": "a b; rm -rf /"})
    argv = job.crawl_args("/py")
    assert argv[:5] == ["/py", "-m", "scrapy", "crawl", "universal"]
    assert "CRAWLFLEET_JOB=u-1" in argv and "CLOSESPIDER_TIMEOUT=5" in argv
    assert "note=a b; rm -rf /" in argv  # one argument, never a shell word
    for bad in ("../x", "a:b", "{x}", "", "a b"):
        with pytest.raises(InvalidJob):
            Job("list", bad)
    with pytest.raises(InvalidJob):
        Job("list", "ok", settings={"lower": "1"})


def _settings(tmp_path: Path, **env: str) -> Any:
    return load({"CRAWLFLEET_RUN_DIR": str(tmp_path), **env})


def test_a_non_loopback_bind_needs_authentication(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("example.org")
    with pytest.raises(InsecureBind):
        ManagerConfig.from_settings(_settings(tmp_path), bind="0.0.0.0")
    config = ManagerConfig.from_settings(_settings(tmp_path, CRAWLFLEET_MANAGER_AUTH="ops:s3cret"), bind="0.0.0.0")
    assert config.auth == ("ops", "s3cret") and config.url.endswith(":6800")
    loopback = ManagerConfig.from_settings(_settings(tmp_path))
    assert loopback.bind == "127.0.0.1" and loopback.auth is None and loopback.max_proc >= 1
    assert loopback.logs_dir == (tmp_path / "manager" / "logs").resolve()
    with pytest.raises(ValueError):
        parse_auth("no-password")


def _request(method: bytes = b"POST", path: bytes = b"/api/crawl", args: dict[bytes, list[bytes]] | None = None,
             **headers: str) -> Any:
    values = {name.replace("_", "-").lower().encode(): value.encode() for name, value in headers.items()}
    return SimpleNamespace(method=method, path=path, args=args or {}, getHeader=lambda name: values.get(name.lower()))


def test_a_state_change_needs_the_token_or_a_json_body() -> None:
    csrf, host = CsrfToken(), "127.0.0.1:6800"
    json_type = "application/json; charset=utf-8"
    assert state_change_refusal(_request(host=host, content_type="text/plain"), csrf)  # the attack
    assert state_change_refusal(_request(host=host, content_length="20"), csrf)  # a body without a type
    assert state_change_refusal(_request(host=host), csrf) is None  # no body, no Origin: `curl -X POST …/stop`
    assert state_change_refusal(_request(host=host, origin="http://evil.example"), csrf)
    assert state_change_refusal(_request(host=host, content_type=json_type), csrf) is None  # curl, scripts
    assert state_change_refusal(_request(host=host, content_type="application/ld+json"), csrf) is None
    assert state_change_refusal(_request(host=host, content_type=json_type, origin=f"http://{host}"), csrf) is None
    assert state_change_refusal(_request(host=host, content_type=json_type, origin="null"), csrf)
    assert state_change_refusal(_request(host=host, content_type="text/plain", x_csrf_token=csrf.value), csrf) is None
    form = "application/x-www-form-urlencoded"
    assert state_change_refusal(_request(path=b"/jobs", host=host, content_type=form,
                                         args={b"csrf_token": [csrf.value.encode()]}), csrf) is None
    assert state_change_refusal(_request(path=b"/jobs", host=host, content_type=form), csrf)
    scrapyd = _request(path=b"/schedule.json", host=host, content_type=form)
    assert state_change_refusal(scrapyd, csrf) is None  # scrapyd's clients: a form, no Origin
    assert state_change_refusal(_request(path=b"/schedule.json", host=host, content_type="multipart/form-data; "
                                         "boundary=x"), csrf) is None  # scrapyd-client's egg upload
    assert state_change_refusal(_request(path=b"/schedule.json", host=host, content_type=form,
                                         origin=f"http://{host}"), csrf)  # a browser's form: the token
    assert state_change_refusal(_request(path=b"/schedule.json", host=host, content_type="text/plain"), csrf)
    assert state_change_refusal(_request(b"GET", host=host), csrf) is None


def test_cross_site_requests_are_recognised() -> None:
    host = "127.0.0.1:6800"
    assert cross_site_reason(_request(host=host)) is None  # scrapyd clients send no Origin
    assert cross_site_reason(_request(host=host, origin=f"http://{host}")) is None
    assert cross_site_reason(_request(host=host, referer=f"http://{host}/jobs")) is None
    assert cross_site_reason(_request(host=host, origin="http://evil.example"))
    assert cross_site_reason(_request(host=host, origin="null"))
    assert cross_site_reason(_request(host=host, referer="http://evil.example/x"))
    assert cross_site_reason(_request(host=host, sec_fetch_site="cross-site"))
    assert cross_site_reason(_request(b"GET", host=host, origin="http://evil.example")) is None  # reads: no change
    assert host_allowed(_request(host=host), "http://127.0.0.1:6800", "127.0.0.1")
    assert host_allowed(_request(host="localhost:6800"), "http://127.0.0.1:6800", "127.0.0.1")
    assert not host_allowed(_request(host="evil.example:6800"), "http://127.0.0.1:6800", "127.0.0.1")


def test_log_paths_cannot_leave_the_log_directory(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "crawlfleet" / "list").mkdir(parents=True)
    (logs / "crawlfleet" / "list" / "j1.log").write_text("ok")
    (tmp_path / "secret.log").write_text("secret")
    assert safe_log_file(logs, ["crawlfleet", "list", "j1.log"]) == (logs / "crawlfleet/list/j1.log").resolve()
    for segments in (["..", "..", "secret.log"], ["crawlfleet", "list", "../../../secret.log"],
                     ["crawlfleet", "..", "j1.log"], ["crawlfleet", "list", "j1.txt"], ["crawlfleet", "list"],
                     ["crawlfleet", "list", "missing.log"]):
        assert safe_log_file(logs, segments) is None, segments
    (logs / "crawlfleet" / "list" / "link.log").symlink_to(tmp_path / "secret.log")
    assert safe_log_file(logs, ["crawlfleet", "list", "link.log"]) is None


def test_the_form_token_is_checked_in_constant_time() -> None:
    token = CsrfToken()
    assert token.valid(token.value) and token.valid(token.value.encode())
    assert not token.valid(None) and not token.valid("") and not token.valid(token.value + "x")


def test_a_crawls_scrapy_stats_are_summed_over_its_workers_but_maxima_stay_maxima() -> None:
    import json

    from manager.console_data import summed_scrapy_stats
    from messaging import keys

    class Written:
        def hgetall(self, key: str) -> dict[bytes, bytes]:
            assert key == keys.crawl_scrapy_stats("c1")
            return {b"w1": json.dumps({"response_received_count": 7, "request_depth_max": 2, "memusage/max": 90,
                                       "elapsed_time_seconds": 4.5, "start_time": "2026-11-29 10:00:00"}).encode(),
                    b"w2": json.dumps({"response_received_count": 5, "request_depth_max": 3, "memusage/max": 80,
                                       "elapsed_time_seconds": 6.0, "log_count/INFO": 3}).encode(),
                    b"w3": b"not json"}

    workers, stats = summed_scrapy_stats(Written(), "c1")
    assert workers == 3
    assert dict(stats) == {"response_received_count": 12, "request_depth_max": 3, "memusage/max": 90,
                           "elapsed_time_seconds": 6.0, "log_count/INFO": 3}


def test_a_log_is_read_in_whole_lines_a_line_being_written_comes_whole_next_time(tmp_path: Path) -> None:
    from manager.console import read_log

    log = tmp_path / "job.log"
    log.write_bytes(b"one\ntwo\nthr")  # the job is writing its third line
    first = read_log(log, None)
    assert first["lines"] == ["one", "two"] and first["offset"] == len(b"one\ntwo\n")
    with log.open("ab") as out:
        out.write(b"ee\nfour\n")
    assert read_log(log, first["offset"])["lines"] == ["three", "four"]
    assert read_log(log, 10_000)["lines"] == ["one", "two", "three", "four"]  # truncated or rotated: the tail again

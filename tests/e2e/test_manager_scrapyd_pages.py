"""scrapyd, fully: ``OPTIONS`` and ``HEAD`` as scrapyd answers them (204, ``Allow``, CORS headers), and ``/jobs``
and ``/logs/`` in scrapyd's own markup, read here the way tools built on scrapyd's pages read them (a regular
expression over ``<tr><td>`` rows, the state from which cells are filled; links to directory listings)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
import requests

from deploy.procs import wait_for
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e
CELL = r"(?:<td>(.*?)</td>\s*)?"
# how scrapyd's page readers find jobs: the head dropped, then <tr><td> rows with up to nine cells
ROW = re.compile(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*" + CELL * 6 + r"[\w\W]*?</tr>")
# the older readers: the whole row on one line, no white space between the cells
STRICT_ROW = re.compile(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>" + r"(?:<td>(.*?)</td>)?" * 6 + "</tr>")
COLUMNS = ("project", "spider", "job", "pid", "start", "runtime", "finish", "log", "items")


def read_jobs(html: str, pattern: re.Pattern[str] = ROW) -> list[dict[str, str]]:
    body = re.sub(r"<thead>.*?</thead>", "", html, flags=re.S)
    return [dict(zip(COLUMNS, row, strict=True)) for row in pattern.findall(body)]


def state_of(row: dict[str, str]) -> str:
    return "pending" if not row["start"] else "running" if not row["finish"] else "finished"


def test_options_and_head_as_scrapyd(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    for path, allowed in (("daemonstatus.json", "OPTIONS, HEAD, GET"), ("schedule.json", "OPTIONS, HEAD, POST"),
                          ("listjobs.json", "OPTIONS, HEAD, GET"), ("cancel.json", "OPTIONS, HEAD, POST")):
        answer = requests.options(f"{manager.url}/{path}", timeout=10)
        assert answer.status_code == 204 and answer.content == b"", path
        assert answer.headers["Allow"] == allowed
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert answer.headers["Access-Control-Allow-Methods"] == allowed
        assert answer.headers["Access-Control-Allow-Headers"] == "X-Requested-With"
    head = requests.head(f"{manager.url}/daemonstatus.json", timeout=10)
    assert head.status_code == 200 and head.content == b"" and int(head.headers["Content-Length"]) > 0
    got = requests.get(f"{manager.url}/daemonstatus.json", timeout=10)
    assert got.json()["status"] == "ok" and got.headers["Access-Control-Allow-Origin"] == "*"


def test_jobs_and_logs_pages_read_as_scrapyds(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m", CRAWLFLEET_MANAGER_MAX_PROC="1").start()
    for job in ("first", "second"):
        manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": job})
    manager.wait_state("first", "running")
    page = requests.get(f"{manager.url}/jobs", timeout=30).text
    assert re.search(r"<h1>Jobs</h1>", page)  # ScrapydWeb checks this before it reads a row
    rows = {row["job"]: row for row in read_jobs(page)}
    assert set(rows) == {"first", "second"}
    assert state_of(rows["first"]) == "running" and state_of(rows["second"]) == "pending"
    assert rows["first"]["project"] == "crawlfleet" and rows["first"]["spider"] == "list"
    assert int(rows["first"]["pid"]) > 0
    datetime.strptime(rows["first"]["start"], "%Y-%m-%d %H:%M:%S")  # scrapyd's str(datetime), no microseconds
    assert re.fullmatch(r"\d+:\d\d:\d\d", rows["first"]["runtime"])
    assert re.search(r'href="(/logs/crawlfleet/list/first\.log)"', rows["first"]["log"])
    assert re.fullmatch(r'<a href="/items/crawlfleet/list/first\.jl">Items</a>', rows["first"]["items"])
    assert rows["second"]["items"] == "" and rows["second"]["log"] == ""  # pending: nothing yet
    assert {row["job"] for row in read_jobs(page, STRICT_ROW)} == {"first", "second"}
    for section in ("Pending", "Running", "Finished"):
        assert f'<th colspan="10">{section}</th>' in page

    wait_for(lambda: "worker first ready" in requests.get(f"{manager.url}/logs/crawlfleet/list/first.log",
                                                           timeout=10).text, 60, "the worker's ready line")
    assert manager.post("cancel.json", {"project": "crawlfleet", "job": "first"}).json()["prevstate"] == "running"
    manager.wait_state("first", "finished")
    rows = {row["job"]: row for row in read_jobs(requests.get(f"{manager.url}/jobs", timeout=30).text)}
    assert state_of(rows["first"]) == "finished"
    datetime.strptime(rows["first"]["finish"], "%Y-%m-%d %H:%M:%S")
    manager.post("cancel.json", {"project": "crawlfleet", "job": "second"})

    # /logs/: scrapyd's directory listings down to the job's log
    listing = requests.get(f"{manager.url}/logs/", timeout=10)
    assert listing.status_code == 200 and listing.headers["content-type"].startswith("text/html")
    assert '<a href="crawlfleet/">crawlfleet/</a>' in listing.text and "<th>Last modified</th>" in listing.text
    assert '<a href="list/">list/</a>' in requests.get(f"{manager.url}/logs/crawlfleet/", timeout=10).text
    files = requests.get(f"{manager.url}/logs/crawlfleet/list/", timeout=10).text
    assert '<a href="first.log">first.log</a>' in files and "[text/plain]" in files
    assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d</td>", files)
    log = requests.get(f"{manager.url}/logs/crawlfleet/list/first.log", timeout=10)
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
    tail = requests.get(f"{manager.url}/logs/crawlfleet/list/first.log", headers={"Range": "bytes=-100"}, timeout=10)
    assert tail.status_code == 206 and tail.content == log.content[-100:]  # Gerapy reads a log's end so
    assert requests.get(f"{manager.url}/logs/crawlfleet/nope/", timeout=10).status_code == 404
    assert requests.get(f"{manager.url}/logs", timeout=10, allow_redirects=False).status_code in (301, 302, 303)


def test_a_proper_404_and_status_messages_by_id(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    missing = requests.get(f"{manager.url}/no-such-page", timeout=10)
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert "Not found" in missing.text and "/no-such-page" in missing.text and 'href="/jobs"' in missing.text

    page = requests.get(f"{manager.url}/jobs", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is None  # no job, no form: take the token from a page that always has one
    token = re.search(r'name="csrf_token" value="([^"]+)"', requests.get(f"{manager.url}/spiders", timeout=30).text)
    assert token is not None
    stopped = manager.post("jobs", {"csrf_token": token.group(1), "job": "nobody"}, allow_redirects=False)
    assert stopped.status_code == 303
    location = stopped.headers["Location"]
    assert "nobody" not in location and "flash=" in location  # the text stays on the server
    shown = requests.get(f"{manager.url}{location}", timeout=10).text
    assert '<p class="message error" id="message" role="alert">no pending or running job nobody</p>' in shown
    assert "id=\"message\"" not in requests.get(f"{manager.url}/jobs", params={"message": "spoofed"}, timeout=10).text


# ScrapydWeb's reading of a directory listing (its Logs and Items pages): rows of class odd/even, a cell a line
LISTED = re.compile(r'<tr class="(?:odd|even)">\n\s+<td>(.*?)</td>\n\s+<td>(.*?)</td>\n(?:\s+<td>(.*?)</td>\n)?'
                    r'\s+<td>(.*?)</td>\n\s+<td>(.*?)</td>\n</tr>')


def test_a_jobs_stats_and_items_as_logparser_and_scrapyd_serve_them(cf: Isolated, procs: Processes,
                                                                   tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "one"})
    manager.wait_state("one", "running")
    # Scrapy's first LogStats line: the engine runs (a SIGTERM before it ends the process without its stats)
    wait_for(lambda: "Crawled 0 pages" in requests.get(f"{manager.url}/logs/crawlfleet/list/one.log",
                                                       timeout=10).text, 60, "the worker's engine running")
    stats = requests.get(f"{manager.url}/logs/crawlfleet/list/one.json", timeout=30)
    assert stats.status_code == 200 and stats.headers["content-type"].startswith("application/json")
    data = stats.json()
    assert data["logparser_version"] == "0.8.4" and data["status"] == "ok"
    datetime.strptime(data["first_log_time"], "%Y-%m-%d %H:%M:%S")
    assert set(data["log_categories"]) == {"critical_logs", "error_logs", "warning_logs", "redirect_logs",
                                           "retry_logs", "ignore_logs"}
    assert "worker one ready" in data["tail"] and data["finish_reason"] == "N/A"
    assert data["datas"][0][1:] == [0, 0, 0, 0] and data["pages"] is not None  # LogStats rows, the live figures
    index = requests.get(f"{manager.url}/logs/stats.json", timeout=30).json()
    assert index["datas"]["crawlfleet"]["list"]["one"]["first_log_time"] == data["first_log_time"]
    assert requests.get(f"{manager.url}/logs/crawlfleet/list/nobody.json", timeout=10).status_code == 404

    assert manager.post("cancel.json", {"project": "crawlfleet", "job": "one"}).json()["prevstate"] == "running"
    manager.wait_state("one", "finished")
    finished = requests.get(f"{manager.url}/logs/crawlfleet/list/one.json", timeout=30).json()
    assert finished["shutdown_reason"] == "Received SIGTERM" and finished["finish_reason"] == "shutdown"
    assert finished["crawler_stats"]["source"] == "log" and "finish_time" in finished["crawler_stats"]

    root = requests.get(f"{manager.url}/items/", timeout=10)
    assert root.status_code == 200 and "Directory listing for /items/" in root.text
    assert [row[0] for row in LISTED.findall(root.text)] == ['<a href="crawlfleet/">crawlfleet/</a>']
    listing = requests.get(f"{manager.url}/items/crawlfleet/list/", timeout=30).text
    (row,) = LISTED.findall(listing)
    assert row[0] == '<a href="one.jl">one.jl</a>' and row[1] == "0 items"
    items = requests.get(f"{manager.url}/items/crawlfleet/list/one.jl", timeout=30)
    assert items.status_code == 200 and items.text == ""  # a worker with no crawl stored nothing
    assert manager.finished("one")["items_url"] == "/items/crawlfleet/list/one.jl"
    assert requests.get(f"{manager.url}/items/crawlfleet/list/nobody.jl", timeout=10).status_code == 404
    assert requests.get(f"{manager.url}/items/..%2f..%2fetc/", timeout=10).status_code == 404

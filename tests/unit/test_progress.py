"""The demo's progress view: snapshots rendered into tables, rates over a sliding window, why a crawl did not finish."""

import pytest
from rich.console import Console

from deploy.progress import (
    CrawlProgress,
    RateMeter,
    Snapshot,
    WorkerProgress,
    diagnose,
    progress_line,
    progress_view,
    summary_tables,
)

pytestmark = pytest.mark.unit


def text_of(*renderables):
    console = Console(record=True, width=160, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


def crawl(crawlid="demo-news", spider="list", state="running", pages=30, items=25, pending=4, seconds=90.0,
          finished=False):
    return CrawlProgress(crawlid, spider, "http://news.fleet.test:1/world/", state, pages, items, pending, seconds,
                         finished)


def worker(job, spider="list", pages=10, weight=None, registered=True, queued=3, leased=1):
    return WorkerProgress(job, spider, registered, queued, leased, pages, weight)


SNAPSHOT = Snapshot(
    seconds=125.0, seeds=7, pages_per_minute=42.25,
    crawls=(crawl(), crawl("demo-blog", "universal", "finished", 60, None, 0, 150.0, True)),
    workers=(worker("h-list-1", pages=30, weight=12.5), worker("h-list-2", pages=10),
             worker("h-universal-1", "universal", pages=0, registered=False)),
)  # fmt: skip


def test_live_view_shows_rate_queues_crawls_and_workers():
    text = text_of(progress_view(SNAPSHOT))
    assert "2:05 elapsed" in text and "42.2 pages/min" in text and "40 pages" in text and "seeds 7" in text
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    news = [cell.strip() for cell in lines["demo-news"].split("│")[1:-1]]
    assert news == ["demo-news", "list", "running", "30", "25", "4", "1:30"]
    blog = [cell.strip() for cell in lines["demo-blog"].split("│")[1:-1]]
    assert blog == ["demo-blog", "universal", "finished", "60", "–", "0", "2:30"]  # MongoDB did not answer: –
    first = [cell.strip() for cell in lines["h-list-1"].split("│")[1:-1]]
    assert first == ["h-list-1", "list", "yes", "3", "1", "30", "12.5"]
    assert lines["h-list-2"].split("│")[-2].strip() == "new"  # no whole busy minute yet: no weight
    assert "no" in lines["h-universal-1"]


def test_summary_gives_pages_per_minute_and_shares():
    crawls, workers = summary_tables(SNAPSHOT)
    text = text_of(crawls, workers)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in text.splitlines() if line.count("│") > 3}
    assert rows["demo-news"] == ["demo-news", "list", "no", "30", "25", "1:30", "20.0"]
    assert rows["demo-blog"] == ["demo-blog", "universal", "yes", "60", "–", "2:30", "24.0"]
    assert rows["h-list-1"] == ["h-list-1", "list", "30", "75%"]
    assert rows["h-list-2"] == ["h-list-2", "list", "10", "25%"]
    assert rows["h-universal-1"] == ["h-universal-1", "universal", "0", "0%"]


def test_summary_without_pages_has_no_shares():
    empty = Snapshot(1.0, 0, None, (), (worker("a", pages=0),))
    assert "–" in text_of(summary_tables(empty)[1])
    assert "– pages/min" in progress_line(empty)


def test_rate_meter_uses_the_last_minute():
    meter = RateMeter(window=60.0)
    assert meter.add(0.0, 0) is None  # one sample: no rate yet
    assert meter.add(30.0, 15) == pytest.approx(30.0)
    assert meter.add(60.0, 30) == pytest.approx(30.0)
    assert meter.add(120.0, 150) == pytest.approx(120.0)  # (150 - 30) over the last 60 s
    assert meter.add(180.0, 150) == pytest.approx(0.0)  # stalled for a minute


def test_diagnose_names_the_likely_reason():
    workers = (worker("h-list-1", leased=2), worker("h-universal-1", "universal", registered=False))
    assert "no Kafka monitor stored it" in diagnose(crawl(state="waiting"), workers)
    assert "no universal worker is registered" in diagnose(crawl(spider="universal"), workers)
    slow = diagnose(crawl(pending=12, pages=40), workers)
    assert slow.startswith("demo-news did not finish") and "12 tasks still pending (2 leased" in slow
    assert "more time than the timeout" in slow
    assert "finisher has not declared it" in diagnose(crawl(pending=0), workers)
    assert "not read from the outbound topic" in diagnose(crawl(state="finished"), workers)
    assert "dead fleet processes: master-m1 (m1.log)" in diagnose(crawl(), workers, ["master-m1 (m1.log)"])

"""The pure parts of ``bench.crawl``: CPU accounting from /proc stat lines, the ratio maths, nginx.conf, the checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crawl import budget_table, ratio, side_order, summarize
from bench.crawl_cpu import (
    CpuSampler,
    cpu_between,
    group_seconds,
    parse_stat,
    read_threads,
    step_seconds,
    step_ticks,
    tree_ticks,
)
from bench.crawl_sides import SideResult, page_work_settings
from bench.crawl_site import Fetch, bench_sites, check_fetches, crawled_paths, file_for, nginx_conf, parse_access_line

pytestmark = pytest.mark.unit

# A real line's shape: a command name with a space and a parenthesis, then state, ppid, … utime(14) … cstime(17).
STAT = "4242 (scrapy (w 1)) S 4000 4242 4000 0 -1 4194560 9000 0 0 0 150 50 7 3 20 0 9 0 100 2000000 9000"


def test_a_stat_line_gives_its_parent_own_and_reaped_ticks() -> None:
    assert parse_stat(STAT) == (4000, 200, 10)


def test_a_tree_counts_live_descendants_and_reaped_children_once() -> None:
    stats = {1: (0, 100, 0), 10: (1, 50, 5), 11: (10, 20, 0), 12: (10, 1, 0), 99: (1, 1000, 0)}
    assert tree_ticks([10], stats) == 50 + 5 + 20 + 1
    assert tree_ticks([10, 11], stats) == 76  # a root listed twice (as a descendant too) counts once
    assert tree_ticks([77], stats) == 0


def test_groups_in_seconds_leave_out_a_group_whose_process_is_gone() -> None:
    stats = {10: (1, 150, 50), 20: (1, 100, 0)}
    assert group_seconds({"workers": [10], "redis": [20], "gone": [30], "half": [20, 31]}, stats, 100) == {
        "workers": 2.0, "redis": 1.0}


def test_cpu_between_interpolates_the_window_ends() -> None:
    samples = [(100.0, {"w": 0.0, "r": 1.0}), (101.0, {"w": 2.0, "r": 1.5}), (102.0, {"w": 3.0})]
    cpu = cpu_between(samples, 100.5, 101.5)
    assert cpu["w"] == pytest.approx(2.5 - 1.0)
    assert cpu["r"] == pytest.approx(0.5 * 0.5)  # "r" left the last sample: its last value is carried on
    assert cpu_between(samples, 90.0, 200.0)["w"] == pytest.approx(3.0)  # outside: the nearest samples
    assert cpu_between([], 0, 1) == {}


def result(side: str, pages: int, seconds: float, cpu: dict[str, float], round_no: int = 1) -> SideResult:
    return SideResult(side, round_no, pages, pages, 3, 1000.0, 1000.0 + seconds, cpu)


def test_summary_medians_ratios_and_cpu_per_1000_pages() -> None:
    runs = [result("scrapy", 6000, 60, {"workers": 30.0, "nginx": 1.2}),
            result("scrapy", 6000, 50, {"workers": 24.0}, 2),
            result("scrapy", 6000, 70, {"workers": 36.0}, 3),
            result("fleet_1", 6000, 120, {"workers": 40.0, "redis": 6.0}),
            result("scrapy_redis", 6000, 80, {"workers": 33.0})]
    summary = summarize(runs)
    assert summary["pages_per_min"] == {"scrapy": 6000.0, "fleet_1": 3000.0, "scrapy_redis": 4500.0}
    assert summary["fleet1_vs_scrapy"] == 0.5
    assert summary["fleet1_vs_scrapy_redis"] == pytest.approx(0.667)
    assert summary["fleet2_vs_scrapy"] is None  # a side that did not run
    assert summary["cpu_s_per_1000_pages"]["scrapy"] == {"workers": 5.0, "nginx": 0.0}  # median of 0.2, 0, 0
    assert list(summary["cpu_s_per_1000_pages"]["fleet_1"]) == ["workers", "redis"]  # process order, not a-z
    assert summary["cpu_s_per_1000_pages"]["fleet_1"]["redis"] == 1.0


def thread_stat(tid: int, name: str, utime: int, stime: int) -> str:
    return f"{tid} ({name}) S 4000 4242 4000 0 -1 4194560 9000 0 0 0 {utime} {stime} 0 0 20 0 9 0 100 2000000 9000"


def fake_proc(root: Path, pid: int, threads: dict[int, tuple[str, int]]) -> Path:
    for tid, (name, ticks) in threads.items():
        task = root / str(pid) / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "stat").write_text(thread_stat(tid, name, ticks, 0))
    return root


def test_a_processs_threads_are_read_by_name_and_ticks(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 4242, {4242: ("python3", 100), 4250: ("feed-w (1)", 30)})
    assert read_threads(4242, proc) == {4242: ("python3", 100), 4250: ("feed-w (1)", 30)}
    assert read_threads(7, proc) == {}  # a process gone: no threads, no error


def test_steps_split_a_worker_into_its_threads_and_its_page_processes() -> None:
    # The worker 10 (its own 200 ticks, 20 of them reaped children's) and its page process 11.
    stats = {10: (1, 200, 20), 11: (10, 70, 0)}
    threads = {10: ("python3", 120), 12: ("feed-job-1", 40), 13: ("heartbeat-job-1", 5), 14: ("python3", 10)}
    steps = step_ticks(10, stats, threads)
    assert steps == {"reactor": 120, "feed": 40, "heartbeat": 5, "threads": 35, "page_processes": 90}
    assert sum(steps.values()) == tree_ticks([10], stats)  # the steps add up to the worker's total


def test_step_seconds_sum_the_roots_of_a_group_and_skip_a_group_gone(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 10, {10: ("python3", 100), 12: ("feed-a", 20)})
    fake_proc(tmp_path, 20, {20: ("python3", 50), 22: ("feed-b", 30)})
    stats = {10: (1, 130, 0), 20: (1, 80, 0), 21: (20, 10, 0)}
    seconds = step_seconds({"workers": [10, 20], "gone": [30]}, ["workers", "gone"], stats, proc, 100)
    assert seconds == {"workers.reactor": 1.5, "workers.feed": 0.5, "workers.heartbeat": 0.0,
                       "workers.threads": 0.1, "workers.page_processes": 0.1}


def test_the_sampler_reads_this_process_by_step() -> None:
    import os

    sampler = CpuSampler(lambda: {"workers": [os.getpid()]}, split=["workers"])
    sampler.sample()
    _, values = sampler.take()[0]
    assert set(values) == {"workers", "workers.reactor", "workers.feed", "workers.heartbeat", "workers.threads",
                           "workers.page_processes"}
    assert values["workers.reactor"] <= values["workers"]


def test_the_profiled_summary_has_a_budget_per_side_beside_scrapys() -> None:
    steps = {"workers.reactor": 6.0, "workers.feed": 0.0, "workers.heartbeat": 0.0, "workers.threads": 0.6,
             "workers.page_processes": 0.0}
    fleet = {"workers.reactor": 3.0, "workers.feed": 1.2, "workers.heartbeat": 0.06, "workers.threads": 0.3,
             "workers.page_processes": 4.2}
    runs = [result("scrapy", 1000, 60, {"workers": 6.6, "nginx": 0.4, **steps}),
            result("fleet_1", 1000, 40, {"workers": 8.76, "master": 0.5, "redis": 1.0, **fleet})]
    summary = summarize(runs)
    assert summary["cpu_s_per_1000_pages"]["scrapy"] == {"workers": 6.6, "nginx": 0.4}  # no steps there
    budget = summary["cpu_ms_per_page"]
    assert list(budget["fleet_1"]) == ["workers.reactor", "workers.feed", "workers.heartbeat", "workers.threads",
                                       "workers.page_processes", "master", "redis", "total"]
    assert budget["scrapy"]["total"] == 7.0  # the steps stand for the workers' total, not beside it
    assert budget["fleet_1"]["total"] == pytest.approx(10.26)
    assert summary["cpu_vs_scrapy"] == {"scrapy": 1.0, "fleet_1": pytest.approx(1.466)}
    table = "\n".join(budget_table(budget, summary["cpu_vs_scrapy"]))
    assert "reactor thread" in table and "page processes" in table and "x scrapy" in table
    assert "cpu_ms_per_page" not in summarize([result("scrapy", 10, 1, {"workers": 1.0})])  # without --profile


def test_ratio_and_round_order() -> None:
    assert ratio(1.0, 0.0) is None and ratio(None, 2.0) is None
    assert ratio(3.0, 2.0) == 1.5
    sides = ["scrapy", "fleet_1", "fleet_2", "scrapy_redis"]
    assert side_order(sides, 1) == sides
    assert side_order(sides, 2) == ["fleet_1", "fleet_2", "scrapy_redis", "scrapy"]
    assert side_order(sides, 5) == sides


def test_nginx_conf_has_one_server_per_site_on_its_address(tmp_path: Path) -> None:
    sites = bench_sites(20)
    conf = nginx_conf(sites, 8123, tmp_path / "cache", tmp_path, as_root=True)
    assert [site.name for site in sites] == ["news.fleet.test", "china.fleet.test", "blog.fleet.test"]
    assert all(site.crawl_delay is None for site in sites)  # no Crawl-delay: the site must not throttle anyone
    for site in sites:
        block = conf.split(f"server_name {site.name};")[0].rsplit("server {", 1)[1]
        assert f"listen {site.ip}:8123;" in block
    assert "listen 127.0.0.12:8123;" in conf and "charset gbk;" in conf
    assert f"root {tmp_path / 'cache' / 'china.fleet.test'};" in conf
    assert conf.count("server {") == 3
    assert "daemon off;" in conf and f"pid {tmp_path / 'nginx.pid'};" in conf
    assert conf.startswith("# generated") and "user root root;" in conf
    assert "user " not in nginx_conf(sites, 8123, tmp_path, tmp_path, as_root=False)
    assert conf.count("{") == conf.count("}")


def test_paths_map_to_files(tmp_path: Path) -> None:
    assert file_for(tmp_path, "/") == tmp_path / "index.html"
    assert file_for(tmp_path, "/world/page/2/") == tmp_path / "world/page/2/index.html"
    assert file_for(tmp_path, "/guonei/index_2.shtml") == tmp_path / "guonei/index_2.shtml"


def test_access_lines_and_the_exactly_once_check() -> None:
    assert parse_access_line("1700000000.123 news.fleet.test /world/ 200") == Fetch(
        1700000000.123, "news.fleet.test", "/world/", 200)
    assert parse_access_line("garbage") is None
    news = bench_sites(12)[0]
    expected = {news.name: crawled_paths(news)}
    assert len(expected[news.name]) == 1 + sum(news.list_pages(s) for s, _ in news.sections) + 12
    fetches = [Fetch(1.0, news.name, "/robots.txt", 200)] + [Fetch(2.0, news.name, p, 200) for p in expected[news.name]]
    check = check_fetches(fetches, expected)
    assert check.ok and check.pages == len(expected[news.name]) and check.robots == 1
    bad = check_fetches([*fetches[:-1], Fetch(3.0, news.name, "/world/", 200), Fetch(3.0, news.name, "/x", 404)],
                        expected)
    assert not bad.ok
    assert any("never fetched" in p for p in bad.problems)
    assert any("fetched twice" in p for p in bad.problems)
    assert any("not a page" in p for p in bad.problems) and any("status 404" in p for p in bad.problems)


def test_page_work_runs_where_each_side_would_run_it_unless_the_environment_says() -> None:
    assert page_work_settings("scrapy", {}) == {"CRAWLFLEET_PAGE_PROCESSES": "0"}
    assert page_work_settings("scrapy_redis", {}) == {"CRAWLFLEET_PAGE_PROCESSES": "0"}
    assert page_work_settings("scrapy_pool", {}) == {"CRAWLFLEET_PAGE_PROCESSES": "-1", "CRAWLFLEET_HOST_WORKERS": "1"}
    assert page_work_settings("fleet_2", {}) == {"CRAWLFLEET_PAGE_PROCESSES": "-1", "CRAWLFLEET_HOST_WORKERS": "2"}
    forced = {"CRAWLFLEET_PAGE_PROCESSES": "1", "HOME": "/x"}
    assert page_work_settings("scrapy", forced) == {"CRAWLFLEET_PAGE_PROCESSES": "1"}
    assert page_work_settings("fleet_1", forced) == {"CRAWLFLEET_PAGE_PROCESSES": "1", "CRAWLFLEET_HOST_WORKERS": "1"}

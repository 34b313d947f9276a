"""The pure parts of ``bench.crawl``: CPU accounting from /proc stat lines, the ratio maths, nginx.conf, the checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crawl import ratio, side_order, summarize
from bench.crawl_cpu import cpu_between, group_seconds, parse_stat, tree_ticks
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

"""The pure maths of ``bench.scaling``: cluster slots, per-shard loads, ceilings, saturation, the single-host check,
the inputs from JSON, and how the measurement classes Redis commands by slot."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from redis.crc import key_slot

from bench.scaling import load_json_inputs, parse_set, report
from bench.scaling_measure import LoggedCommand, first_key, key_class, redis_shares
from bench.scaling_model import (
    Inputs,
    cluster_slot_ranges,
    first_saturation,
    from_crawl_summary,
    master_bound,
    mongo_bound,
    predict,
    redis_bound,
    saturation,
    shard_loads,
    shard_of,
    single_host,
    worker_rate,
)

pytestmark = pytest.mark.unit

SIMPLE = Inputs(worker_cpu_s_per_page=0.005, worker_core_share=1.0, redis_cpu_s_per_page=0.0002,
                redis_fixed_slot_shares={}, items_per_page=1.0, mongo_cpu_s_per_item=0.0005, mongo_nodes=1,
                master_dispatch_per_s=10_000, master_cpu_s_per_task=0.0, other_cpu_s_per_page=0.0,
                measured_pages_per_min={}, measured_cpu_s_per_page={})


def test_slots_are_dealt_out_as_redis_cli_does() -> None:
    assert cluster_slot_ranges(1) == [(0, 16383)]
    assert cluster_slot_ranges(3) == [(0, 5460), (5461, 10922), (10923, 16383)]
    assert cluster_slot_ranges(6) == [(0, 2730), (2731, 5460), (5461, 8191), (8192, 10922), (10923, 13652),
                                      (13653, 16383)]
    ranges = cluster_slot_ranges(7)
    assert ranges[0][0] == 0 and ranges[-1][1] == 16383
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    assert shard_of(key_slot(b"seeds"), cluster_slot_ranges(3)) == 2  # slot 12098
    assert shard_of(key_slot(b"workers"), cluster_slot_ranges(3)) == 0  # slot 2466
    with pytest.raises(ValueError):
        cluster_slot_ranges(0)


def test_fixed_slots_stay_on_their_shard_and_the_rest_spreads() -> None:
    loads = shard_loads({"seeds": 0.3, "workers": 0.1}, 3)
    assert sum(loads) == pytest.approx(1.0)
    assert loads == pytest.approx([0.1 + 0.2, 0.2, 0.3 + 0.2])
    assert shard_loads({"seeds": 0.3}, 1) == pytest.approx([1.0])
    with pytest.raises(ValueError):
        shard_loads({"seeds": 0.7, "workers": 0.5}, 3)


def test_redis_ceiling_grows_with_shards_up_to_the_hot_slot() -> None:
    single = 60 / 0.0002  # one core, 0.2 ms a page: 300,000 pages/min
    assert redis_bound(SIMPLE, 1) == pytest.approx(single)
    assert redis_bound(SIMPLE, 6) == pytest.approx(6 * single)  # nothing on a fixed slot: linear
    hot = Inputs(redis_cpu_s_per_page=0.0002, redis_fixed_slot_shares={"seeds": 0.25})
    assert redis_bound(hot, 1) == pytest.approx(single)
    assert redis_bound(hot, 3) == pytest.approx(single / (0.25 + 0.75 / 3))
    assert redis_bound(hot, 1000) < single / 0.25  # never past the seeds slot's own core
    assert redis_bound(hot, 6) > redis_bound(hot, 3) > redis_bound(hot, 1)


def test_pages_per_minute_is_the_lowest_ceiling_and_names_it() -> None:
    rate = worker_rate(SIMPLE)
    assert rate == pytest.approx(12_000)
    assert mongo_bound(SIMPLE) == pytest.approx(120_000)
    assert master_bound(SIMPLE) == pytest.approx(600_000)
    point = predict(SIMPLE, 5, 1)
    assert (point.pages_per_min, point.binding) == (pytest.approx(60_000), "workers")
    point = predict(SIMPLE, 20, 1)
    assert (point.pages_per_min, point.binding) == (pytest.approx(120_000), "mongodb")
    point = predict(SIMPLE, 40, 1, parts=("workers", "redis", "master"))
    assert (point.pages_per_min, point.binding) == (pytest.approx(300_000), "redis")


def test_saturation_is_the_first_worker_count_that_reaches_a_ceiling() -> None:
    assert saturation(SIMPLE, 1) == {"redis": 25, "mongodb": 10, "master": 50}
    assert first_saturation(SIMPLE, 1) == ("mongodb", 10)
    assert first_saturation(SIMPLE, 3, ("workers", "redis", "master")) == ("master", 50)  # Redis 900k > 600k
    unbounded = Inputs(redis_cpu_s_per_page=0, mongo_cpu_s_per_item=0, master_dispatch_per_s=math.inf)
    assert first_saturation(unbounded, 1) is None


def test_one_host_adds_its_cores_as_a_ceiling() -> None:
    inputs = Inputs(worker_cpu_s_per_page=0.005, worker_core_share=1.0, host_cores=2,
                    measured_cpu_s_per_page={2: 0.006})
    point = single_host(inputs, 2)
    assert point.binding == "host"
    assert point.pages_per_min == pytest.approx(2 * 60 / 0.006)
    assert single_host(inputs, 1).binding == "workers"


def test_inputs_from_json_and_from_a_crawl_summary(tmp_path: Path) -> None:
    updated = Inputs().with_values({"measured_pages_per_min": {"1": 9000, "2": "15000"}, "host_cores": "4",
                                    "redis_fixed_slot_shares": {"seeds": "0.2"}, "unknown": 1, "mongo_nodes": None})
    assert updated.measured_pages_per_min == {1: 9000.0, 2: 15000.0}
    assert updated.host_cores == 4 and updated.redis_fixed_slot_shares == {"seeds": 0.2}
    assert updated.mongo_nodes == Inputs().mongo_nodes
    summary = {"pages_per_min": {"scrapy": 12000, "fleet_1": 10000, "fleet_2": 15000},
               "cpu_s_per_1000_pages": {"fleet_1": {"workers": 5.0, "redis": 0.2, "mongodb": 0.4, "master": 0.05,
                                                    "nginx": 0.05},
                                        "fleet_2": {"workers": 4.8, "redis": 0.2}}}
    values = from_crawl_summary(summary)
    assert values["measured_pages_per_min"] == {1: 10000, 2: 15000}
    assert values["measured_cpu_s_per_page"] == pytest.approx({1: 0.0057, 2: 0.005})
    assert values["worker_cpu_s_per_page"] == pytest.approx(0.005)
    assert values["worker_core_share"] == pytest.approx(10000 / 60 * 0.005)
    assert values["other_cpu_s_per_page"] == pytest.approx(0.00005)
    path = tmp_path / "crawl.out"
    path.write_text("noise\n" + json.dumps(summary) + "\n")
    assert load_json_inputs(path)[0] == values
    own = tmp_path / "own.json"
    own.write_text(json.dumps({"inputs": {"mongo_nodes": 3}, "measure": {"redis_commands_per_page": 27.8}}))
    assert load_json_inputs(own) == ({"mongo_nodes": 3}, {"redis_commands_per_page": 27.8})
    assert parse_set(["mongo_nodes=4", "redis_fixed_slot_shares={\"seeds\": 0.1}"]) == {
        "mongo_nodes": 4, "redis_fixed_slot_shares": {"seeds": 0.1}}
    with pytest.raises(ValueError):
        parse_set(["mongo_nodes"])


def test_the_report_checks_the_measured_points() -> None:
    lines, summary = report(Inputs(), {}, 64)
    assert [row["workers"] for row in summary["check"]] == [1, 2]
    assert summary["check"][0]["ratio"] == pytest.approx(1.0, abs=0.02)  # the core share comes from this point
    assert len(summary["curves"]["Cluster 6"]) == 64
    assert any(line.startswith("Check against") for line in lines)


def test_a_logged_command_lands_where_its_first_key_does() -> None:
    positions = {"zadd": 1, "time": 0, "hincrby": 1}
    assert first_key([b"EVALSHA", b"abc", b"2", b"seeds", b"x"], positions) == "seeds"
    assert first_key([b"EVALSHA", b"abc", b"0"], positions) is None
    assert first_key([b"ZADD", b"job:{a.test}:queue", b"1", b"t"], positions) == "job:{a.test}:queue"
    assert first_key([b"TIME"], positions) is None
    domains = ("a.test",)
    classes = {key: key_class(key, domains, "fleet_1-", "r2-fleet_1-") for key in (
        "seeds", "master:{seeds}:epoch", "workers", "workers:{workers}:activity:j", "fleet_1-9-w0:{a.test}:queue",
        "crawl:r2-fleet_1-a", "bloom:r2-fleet_1-a:{r2-fleet_1-a:0}:l0:p0", "worker:fleet_1-9-w0",
        "stats:crawler:universal:200:60")}
    assert classes == {"seeds": "seeds", "master:{seeds}:epoch": "seeds", "workers": "workers",
                       "workers:{workers}:activity:j": "workers", "fleet_1-9-w0:{a.test}:queue": "domain",
                       "crawl:r2-fleet_1-a": "crawl", "bloom:r2-fleet_1-a:{r2-fleet_1-a:0}:l0:p0": "crawl",
                       "worker:fleet_1-9-w0": "job", "stats:crawler:universal:200:60": "other"}
    assert key_class(None, domains, "j", "c") == "keyless"


def test_redis_work_is_split_by_time_and_by_command_count() -> None:
    commands = [LoggedCommand("EVALSHA", "seeds", 60), LoggedCommand("ZADD", "j:{a.test}:queue", 30),
                LoggedCommand("TIME", None, 0), LoggedCommand("HINCRBY", "stats:x:60", 10)]
    split = redis_shares(commands, 0.5, ("a.test",), "j:", "c-")
    assert split["time"] == {"domain": 0.3, "keyless": 0.0, "other": 0.1, "seeds": 0.6}
    assert split["commands"] == {"domain": 0.25, "keyless": 0.25, "other": 0.25, "seeds": 0.25}
    assert split["class"]["seeds"] == pytest.approx(0.5 * 0.6 + 0.5 * 0.25)
    assert sum(split["class"].values()) == pytest.approx(1.0)
    assert split["fixed"] == {"seeds": pytest.approx(0.425), "stats:x:60": pytest.approx(0.175)}
    assert split["names"]["seeds"] == {"EVALSHA": 1}

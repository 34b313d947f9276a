"""bench.soak's figures from RSS samples: growth after the warm-up, the checks, a run's samples read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import judge, main, side_from_samples
from bench.soak_rss import Sample, growth, series

pytestmark = pytest.mark.unit


def _samples(slope_mb_per_100k: float, pages: int = 60_000, step: int = 2_000) -> list[Sample]:
    return [Sample(float(n), n, {"worker 1": 200.0 + n * slope_mb_per_100k / 100_000, "redis": 50.0 + n / 1_000})
            for n in range(0, pages + 1, step)]


def test_growth_is_measured_after_the_warm_up_in_mb_per_100k_pages():
    figures = growth(series(_samples(40.0))["worker 1"])
    assert figures["at_warm"] == pytest.approx(204.0) and figures["mb_per_100k"] == pytest.approx(40.0)
    assert figures["end"] == pytest.approx(224.0) and figures["end_vs_warm"] == pytest.approx(224 / 204, abs=1e-3)


def test_the_checks_fail_a_growing_fleet_process_never_a_service():
    flat = {name: growth(points) for name, points in series(_samples(5.0)).items()}
    assert judge("fleet_1", 60_000, flat) == []  # redis grows 100 MB per 100k: a service, not judged
    growing = {name: growth(points) for name, points in series(_samples(40.0)).items()}
    assert any("worker 1 grew 40.0 MB per 100,000 pages" in problem for problem in judge("fleet_1", 60_000, growing))
    assert judge("fleet_1", 5_000, flat)  # too few pages to tell


def test_a_run_stopped_early_is_read_back_from_its_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "soak-samples-fleet_2.jsonl"
    path.write_text("".join(json.dumps({"seconds": s.seconds, "pages": s.pages, "rss_mb": s.rss_mb}) + "\n"
                            for s in _samples(5.0)))
    side = side_from_samples(path)
    assert side["side"] == "fleet_2" and side["workers"] == 2 and side["pages"] == 60_000 and side["partial"]
    assert side["processes"]["worker 1"]["mb_per_100k"] == pytest.approx(5.0)
    assert main(["--from-samples", str(path), "--json"]) == 1  # partial: whether the crawl completed is unknown
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["sides"]["fleet_2"]["processes"]["worker 1"]["mb_per_100k"] == pytest.approx(5.0)
    assert (tmp_path / "soak.png").stat().st_size > 10_000 and (tmp_path / "soak.json").exists()

"""The provisioned Grafana dashboard loads: its JSON has the shape Grafana's dashboard schema asks for, every panel
reads the provisioned Prometheus, and every crawlfleet metric it queries is one that crawlfleet exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "monitoring" / "grafana"
PANEL_TYPES = {"timeseries", "stat", "gauge", "table", "bargauge", "text"}
EXPORTERS = ("messaging/metrics.py", "messaging/stats.py", "frontier/metrics.py", "spiders/metrics.py",
             "manager/metrics.py")


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads((GRAFANA / "dashboards" / "crawlfleet.json").read_text())


def exported_names() -> set[str]:
    names: set[str] = set()
    for path in EXPORTERS:
        names |= set(re.findall(r'"(crawlfleet_[a-z_]+)"', (REPO / path).read_text()))
    return names


def test_the_dashboard_has_grafanas_shape(dashboard):
    assert isinstance(dashboard["uid"], str) and 0 < len(dashboard["uid"]) <= 40
    assert dashboard["title"] and isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["time"]["from"] == "now-6h"  # the fleet over hours
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 10
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["title"]
        grid = panel["gridPos"]
        assert set(grid) == {"x", "y", "w", "h"} and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        assert panel["targets"] and all(t["refId"] and t["expr"] for t in panel["targets"])


def test_every_panel_reads_the_provisioned_prometheus(dashboard):
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus" and prometheus["url"] == "http://prometheus:9090"
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": prometheus["uid"]}
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "crawlfleet.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_every_queried_metric_is_exported(dashboard):
    exported = exported_names()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            for name in re.findall(r"\b(crawlfleet_[a-z_]+)", expr):
                base = re.sub(r"_(total|created)$", "", name)
                assert base in exported, f"{panel['title']}: {name} is not a metric crawlfleet exports"


# labels Prometheus sets on every target: a metric's own label of such a name is renamed exported_<name> at scrape
TARGET_LABELS = {"job", "instance"}
# labels the scrape configs put on every target (deploy/monitoring/prometheus.yml, crawlfleet's file_sd file)
SCRAPE_LABELS = {"service", "instance", "job"}


def exported_labels() -> set[str]:
    """Every label name crawlfleet's metrics carry: ``labels=[…]`` of the collectors, the label lists of the
    prometheus_client metrics, and the worker labels' constant."""
    found: set[str] = set()
    for path in EXPORTERS:
        text = (REPO / path).read_text()
        lists = re.findall(r"labels=\[([^\]]*)\]", text)
        lists += re.findall(r'(?:Counter|Gauge|Histogram|Summary)\("crawlfleet_[a-z_]+",\s*"[^"]*",\s*\[([^\]]*)\]',
                            text, re.S)
        lists += re.findall(r"WORKER_LABELS = \[([^\]]*)\]", text)
        for names in lists:
            found |= set(re.findall(r'"([a-z_]+)"', names))
    return found


def test_no_metric_carries_a_label_prometheus_keeps_for_the_target():
    labels = exported_labels()
    assert {"worker", "spider_type", "status", "crawlid", "module"} <= labels, labels  # the regexes still match
    assert not labels & TARGET_LABELS, f"labels Prometheus renames exported_*: {labels & TARGET_LABELS}"


def test_every_grouping_label_is_one_the_metrics_or_the_scrape_carry(dashboard):
    known = exported_labels() | SCRAPE_LABELS
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for group in re.findall(r"\bby \(([^)]*)\)", target["expr"]):
                for label in (name.strip() for name in group.split(",")):
                    assert label in known, f"{panel['title']}: groups by {label!r}, which no metric carries"
                    assert label != "job", f"{panel['title']}: groups by the scrape job"
            for label in re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")):
                assert label in known, f"{panel['title']}: legend names {label!r}"

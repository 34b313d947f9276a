"""The shipped Prometheus alert rules (deploy/monitoring/alerts.yml) pass Debian's ``promtool``: the rules check,
every rule has test cases that fire it (alerts_test.yml), and every metric they read is one crawlfleet exports."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.plugins.services import REPO

pytestmark = pytest.mark.unit

MONITORING = REPO / "deploy" / "monitoring"
SOURCES = ("messaging", "frontier", "master", "spiders", "manager")


def promtool(*args: str) -> str:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is needed (Debian's prometheus package: deploy/install-deps.sh installs it)")
    done = subprocess.run([binary, *args], cwd=MONITORING, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"]
            for rule in group["rules"]]


def test_the_rules_are_valid_and_their_test_cases_pass() -> None:
    assert "SUCCESS" in promtool("check", "rules", "alerts.yml")
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml")


def test_every_rule_has_a_case_that_fires_it() -> None:
    cases = yaml.safe_load((MONITORING / "alerts_test.yml").read_text())["tests"]
    fired = {(check["alertname"], alert["exp_labels"].get("store"))
             for case in cases for check in case["alert_rule_test"] for alert in check["exp_alerts"]}
    wanted = {(rule["alert"], rule.get("labels", {}).get("store")) for rule in rules()}
    assert wanted <= fired, f"rules without a firing case: {wanted - fired}"
    names = {rule["alert"] for rule in rules()}
    assert {"CrawlfleetWorkerGone", "CrawlfleetStoreDown", "CrawlfleetCrawlStalled", "CrawlfleetDeadLettersGrowing",
            "CrawlfleetHeartbeatOld"} <= names


def test_the_rules_read_only_metrics_crawlfleet_exports() -> None:
    code = "\n".join(path.read_text() for source in SOURCES for path in (REPO / source).rglob("*.py"))
    for rule in rules():
        for metric in set(re.findall(r"\bcrawlfleet_[a-z_]+", rule["expr"])):
            exported = metric.removesuffix("_total")  # prometheus-client adds _total to a counter's name
            assert f'"{exported}"' in code, f"{rule['alert']} reads {metric}, which no crawlfleet process exports"


def test_prometheus_loads_the_rules_and_compose_mounts_them() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    volumes = compose["services"]["prometheus"]["volumes"]
    assert "./deploy/monitoring/alerts.yml:/etc/prometheus/alerts.yml:ro" in volumes

"""docker-compose.yml can't run here (no Docker engine): check that it is well-formed and honest instead."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from deploy.cli import main
from messaging.settings import SETTINGS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OFFICIAL_IMAGES = {"redis", "zookeeper", "kafka", "mongo"}


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def _own_services(compose):
    return {name: spec for name, spec in compose["services"].items() if "build" in spec}


def test_infrastructure_uses_official_images(compose):
    images = {name: compose["services"][name]["image"] for name in OFFICIAL_IMAGES}
    assert images["redis"].startswith("redis:")
    assert images["zookeeper"].startswith("zookeeper:")
    assert images["kafka"].startswith("apache/kafka:")
    assert images["mongo"].startswith("mongo:")


def test_own_services_are_built_from_the_dockerfile(compose):
    own = _own_services(compose)
    assert {"master", "kafka-monitor", "redis-monitor"} <= set(own)
    for spec in own.values():
        assert (REPO / spec["build"]["dockerfile"]).is_file()


def test_every_command_is_a_real_crawlfleet_command(compose):
    runner = CliRunner()
    for name, spec in _own_services(compose).items():
        result = runner.invoke(main, [*spec["command"], "--help"])
        assert result.exit_code == 0, f"{name}: crawlfleet {' '.join(spec['command'])} --help\n{result.output}"


def test_every_variable_is_a_documented_setting(compose):
    for name, spec in _own_services(compose).items():
        for variable in spec.get("environment", {}):
            assert variable in SETTINGS, f"{name} sets {variable}, which is not a documented setting"


def test_workers_of_each_spider_type_are_scalable_services(compose):
    own = _own_services(compose)
    for spider in ("list", "universal"):
        spec = own[f"worker-{spider}"]
        assert spec["command"] == ["worker", "--spider", spider]
        # --scale needs replicas that differ: no fixed job id, container name or host port
        assert "--job" not in spec["command"] and "container_name" not in spec and "ports" not in spec
        assert spec["environment"]["CRAWLFLEET_REDIS_URL"] == own["master"]["environment"]["CRAWLFLEET_REDIS_URL"]
        assert spec["stop_grace_period"]  # time to hand the leases back on SIGTERM


MONITORING = REPO / "deploy" / "monitoring"


def test_prometheus_and_grafana_are_official_images_with_the_repos_config(compose):
    services = compose["services"]
    assert services["prometheus"]["image"].startswith("prom/prometheus:v")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    for name in ("prometheus", "grafana"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts {source}, which is not in the repository"
            else:
                assert source in compose["volumes"], f"{name}: volume {source} is not declared"


def test_prometheus_scrapes_what_the_managers_file_sd_file_lists(compose):
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    manager = compose["services"]["manager"]
    written = manager["environment"]["CRAWLFLEET_PROMETHEUS_SD_FILE"]
    volume = next(v for v in manager["volumes"] if written.startswith(v.split(":")[1]))
    assert f"{volume.split(':')[0]}:{volume.split(':')[1]}:ro" in compose["services"]["prometheus"]["volumes"]
    for name in ("crawlfleet", "crawlfleet-manager"):  # every target of the file, the manager with its password
        (discovery,) = jobs[name]["file_sd_configs"]
        assert discovery["files"] == [written]
    user, _, password = manager["environment"]["CRAWLFLEET_MANAGER_AUTH"].split(":-", 1)[1].rstrip("}") \
        .partition(":")
    assert jobs["crawlfleet-manager"]["basic_auth"] == {"username": user, "password": password}
    assert manager["command"] == ["manager", "--bind", "0.0.0.0"]
    assert compose["x-crawlfleet"]["environment"]["CRAWLFLEET_METRICS_HOST"] == "0.0.0.0"
    assert "dns_sd_configs" not in jobs["crawlfleet"]  # one discovery: a target found twice is counted twice


def test_stores_have_healthchecks_that_write_and_restart_when_they_fail(compose):
    writes = {"redis": "redis-cli SET", "mongo": ".updateOne(", "kafka": "kafka-console-producer.sh",
              "zookeeper": "srvr"}
    for name, probe in writes.items():
        spec = compose["services"][name]
        assert spec["restart"] == "unless-stopped", name
        test = spec["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and probe in test[1], name
        assert "kill 1" in test[1] and "/tmp/health-fails" in test[1], name  # unhealthy 3x: the container restarts
    for name, spec in _own_services(compose).items():
        assert spec["restart"] == "unless-stopped", name

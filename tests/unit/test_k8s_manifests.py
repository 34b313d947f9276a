"""deploy/k8s, rendered by the real ``kubectl kustomize``: every resource valid against the Kubernetes schemas
(kubernetes-validate, Kubernetes 1.33, strict) and the ScaledObjects against KEDA's CRD (v2.20.2, vendored in
deploy/k8s/schemas); configuration only through declared CRAWLFLEET_* settings; a worker Deployment and a
ScaledObject per registered spider type; two masters kept by a PodDisruptionBudget; every crawlfleet container
non-root on a read-only root filesystem, with requests, limits and probes on the port its process serves them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from deploy import k8s_workers
from messaging.settings import SETTINGS
from messaging.spider_types import NAMES
from tests.plugins.k8s import (
    K8S,
    OVERLAYS,
    REPO,
    container,
    crawlfleet_deployments,
    env_names,
    named,
    of_kind,
    render,
)

pytestmark = pytest.mark.unit

KUBERNETES = "1.33.0"
KEDA = json.loads((K8S / "schemas" / "keda-v2.20.2.json").read_text())


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[dict[str, Any], ...]:
    return render(request.param)


def test_every_resource_validates_against_the_kubernetes_and_keda_schemas(overlay: tuple[dict[str, Any], ...]) -> None:
    keda = jsonschema.Draft7Validator(KEDA["scaledobject_schema"])
    parameters = {p["name"]: p for p in KEDA["prometheus_trigger_parameters"]}
    required = {name for name, p in parameters.items() if not p.get("optional") and "default" not in p}
    for resource in overlay:
        if resource["kind"] == "ScaledObject":
            assert resource["apiVersion"] == KEDA["api_version"]
            errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in keda.iter_errors(resource)]
            assert not errors, (resource["metadata"]["name"], errors)
            for trigger in resource["spec"]["triggers"]:
                assert trigger["type"] == "prometheus"
                assert set(trigger["metadata"]) <= set(parameters), set(trigger["metadata"]) - set(parameters)
                assert required <= set(trigger["metadata"])
                assert all(isinstance(value, str) for value in trigger["metadata"].values())
            continue
        kubernetes_validate.validate(resource, KUBERNETES, strict=True)


def test_every_variable_is_a_declared_setting_and_parses(overlay: tuple[dict[str, Any], ...]) -> None:
    names = env_names(overlay)
    assert names and all(name.startswith("CRAWLFLEET_") for name in names), names
    assert names <= set(SETTINGS), names - set(SETTINGS)
    for config in of_kind(overlay, "ConfigMap"):
        if config["metadata"]["name"].startswith("crawlfleet-config"):
            for name, value in config["data"].items():
                SETTINGS[name].parse(value)
    for deployment in crawlfleet_deployments(overlay):  # nothing else reaches the process: no service links either
        assert set(container(deployment)) & {"envFrom", "env"}
        assert deployment["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_one_worker_deployment_and_scaled_object_per_spider_type(overlay: tuple[dict[str, Any], ...]) -> None:
    assert (K8S / "base" / "workers.yaml").read_text() == k8s_workers.render(), "run make k8s"
    workers = {d["metadata"]["name"]: d for d in crawlfleet_deployments(overlay) if "worker" in d["metadata"]["name"]}
    assert set(workers) == {f"crawlfleet-worker-{name}" for name in NAMES}
    scaled = {s["spec"]["scaleTargetRef"]["name"]: s for s in of_kind(overlay, "ScaledObject")}
    assert set(scaled) == set(workers)
    for name in NAMES:
        deployment = workers[f"crawlfleet-worker-{name}"]
        assert container(deployment)["args"] == ["worker", "--spider", name]
        assert "replicas" not in deployment["spec"]  # KEDA owns the count
        spec = scaled[deployment["metadata"]["name"]]["spec"]
        (trigger,) = spec["triggers"]
        assert trigger["metadata"]["query"] == f'max(crawlfleet_ready_tasks{{spider_type="{name}"}})'
        assert trigger["metricType"] == "AverageValue"
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        # scale-down goes no faster than a worker drains
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        (policy,) = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["policies"]
        assert policy == {"type": "Pods", "value": 1, "periodSeconds": grace}
        assert grace >= k8s_workers.DRAIN_GRACE_SECONDS


def test_two_masters_and_a_budget_that_keeps_one(overlay: tuple[dict[str, Any], ...]) -> None:
    master = named(overlay, "Deployment", "crawlfleet-master")
    assert master["spec"]["replicas"] == 2
    budget = named(overlay, "PodDisruptionBudget", "crawlfleet-master")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= master["spec"]["template"]["metadata"]["labels"].items()


def test_pods_are_non_root_read_only_sized_and_probed_where_they_serve(overlay: tuple[dict[str, Any], ...]) -> None:
    config = next(c["data"] for c in of_kind(overlay, "ConfigMap") if c["metadata"]["name"].startswith("crawlfleet-c"))
    uid = int(re.search(r"useradd --uid (\d+)", (REPO / "deploy" / "Dockerfile").read_text()).group(1))
    for deployment in crawlfleet_deployments(overlay):
        pod = deployment["spec"]["template"]["spec"]
        spec = container(deployment)
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == uid
        assert spec["securityContext"]["readOnlyRootFilesystem"] is True
        assert {m["mountPath"] for m in spec["volumeMounts"]} >= {"/tmp", "/home/crawlfleet"}
        assert set(spec["resources"]["requests"]) == set(spec["resources"]["limits"]) == {"cpu", "memory"}
        manager = spec["args"] == ["manager"]
        port = int(config["CRAWLFLEET_MANAGER_PORT" if manager else "CRAWLFLEET_METRICS_PORT"])
        ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
        for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"), ("startupProbe", "/livez")):
            assert spec[probe]["httpGet"]["path"] == path
            assert ports[spec[probe]["httpGet"]["port"]] == port
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        if manager:  # its /metrics needs its credentials
            assert "prometheus.io/scrape" not in annotations
        else:
            assert annotations["prometheus.io/scrape"] == "true" and int(annotations["prometheus.io/port"]) == port


def test_production_keeps_no_secret_and_dev_runs_composes_official_images() -> None:
    production = render("production")
    assert not of_kind(production, "Secret")  # created by the operator, never in git
    example = (K8S / "overlays" / "production" / "secrets.env.example").read_text()
    wanted = {k for k in env_names(production) if k in ("CRAWLFLEET_REDIS_URL", "CRAWLFLEET_MONGO_URI",
                                                         "CRAWLFLEET_MANAGER_AUTH")}
    assert wanted <= set(re.findall(r"^(CRAWLFLEET_\w+)=", example, re.M))
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    dev = render("dev")
    stores = {s["metadata"]["name"]: s["spec"]["template"]["spec"]["containers"][0]["image"]
              for s in of_kind(dev, "StatefulSet")}
    assert stores == {name: compose[name]["image"] for name in ("redis", "zookeeper", "kafka", "mongo")}
    assert named(dev, "Deployment", "prometheus")["spec"]["template"]["spec"]["containers"][0]["image"] == \
        compose["prometheus"]["image"]


def test_the_sizing_figures_are_written_beside_the_manifests() -> None:
    text = (Path(K8S) / "SIZING.md").read_text()
    assert "python -m bench.k8s_sizing" in text

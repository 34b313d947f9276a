"""A release is one version everywhere: CHANGELOG.md's newest release, pyproject.toml, `crawlfleet --version` and the
Kubernetes image tags; [Unreleased] stays on top for what comes next."""

from __future__ import annotations

import re
import tomllib
from datetime import date
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from deploy.cli import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^## \[([^\]]+)\](?: - (\S+))?$", re.M)
SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def releases(text: str) -> list[tuple[str, str | None]]:
    """CHANGELOG.md's sections, newest first: (version or "Unreleased", date)."""
    return HEADING.findall(text)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.partition("-")[0].split("."))


def test_the_changelogs_newest_release_is_pyprojects_version() -> None:
    sections = releases((ROOT / "CHANGELOG.md").read_text())
    assert sections[0] == ("Unreleased", ""), "CHANGELOG.md starts with an [Unreleased] section"
    released = sections[1:]
    assert released, "CHANGELOG.md has no release"
    assert released[0][0] == project_version(), "the newest release in CHANGELOG.md is not pyproject.toml's version"
    for name, day in released:
        assert SEMVER.fullmatch(name), f"[{name}] is no semantic version"
        date.fromisoformat(day)  # "## [x.y.z] - YYYY-MM-DD"
    assert [version_key(name) for name, _ in released] == sorted((version_key(n) for n, _ in released), reverse=True)
    assert [day for _, day in released] == sorted((day for _, day in released), reverse=True)
    assert len({name for name, _ in released}) == len(released), "a version released twice"


def test_crawlfleet_version_prints_the_projects_version() -> None:
    result = CliRunner().invoke(main, ["--version"], prog_name="crawlfleet")
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["crawlfleet,", "version", project_version()], (
        f"{result.output!r}: the installed metadata says {installed_version('crawlfleet')}; reinstall (make venv)")


@pytest.mark.parametrize("kustomization", ["base", "overlays/production"])
def test_the_kubernetes_image_is_the_release(kustomization: str) -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "k8s" / kustomization / "kustomization.yaml").read_text())
    tags = {image["name"]: image.get("newTag") for image in manifest["images"]}
    assert tags["crawlfleet"] == project_version()


def test_a_changelog_without_a_release_or_with_another_version_is_caught() -> None:
    assert releases("# Changelog\n\n## [Unreleased]\n\n### Added\n- x\n") == [("Unreleased", "")]
    text = "## [Unreleased]\n\n## [0.9.0] - 2026-11-29\n\n## [0.8.1] - 2026-10-01\n"
    assert releases(text) == [("Unreleased", ""), ("0.9.0", "2026-11-29"), ("0.8.1", "2026-10-01")]
    assert version_key("0.10.0") > version_key("0.9.0")
